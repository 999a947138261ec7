"""The user cache directory: downloaded datasets, graph indexes — never beside the user's data."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "TRACEGRAPH_CACHE_DIR"


def cache_dir() -> Path:
    """``$TRACEGRAPH_CACHE_DIR`` when set, else the platform's user cache dir (``~/.cache/tracegraph`` on Linux)."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("tracegraph", appauthor=False))
