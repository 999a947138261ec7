"""The search-space file of ``tracegraph tune`` (JSON).

For example::

    {
      "format": "tracegraph-search-space", "version": 1,
      "preset": "umls",                       # optional: the settings every trial starts from
      "fixed": {"epochs": 50, "eval_every": 5},  # optional: settings every trial shares
      "params": {                             # what TPE samples; names are train settings
        "learning_rate":   {"type": "float", "low": 0.0003, "high": 0.01, "log": true},
        "output_dropout":  {"type": "float", "low": 0.0, "high": 0.5, "step": 0.05},
        "lr_patience":     {"type": "int", "low": 1, "high": 10},
        "batch_size":      {"type": "categorical", "choices": [128, 256, 512]},
        "embedding_shape": {"type": "categorical", "choices": ["10x20", "12x24"]}
      },
      "pruner": {"n_startup_trials": 5, "n_warmup_steps": 10}   # optional: median pruner knobs
    }

``embedding_shape`` "HxW" sets embedding_height, embedding_width and embedding_dim = H·W together
(the three must agree, so they are one choice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tracegraph.errors import DataError

FORMAT = "tracegraph-search-space"
VERSION = 1
SHAPE = "embedding_shape"
PRUNER_KEYS = {"n_startup_trials", "n_warmup_steps", "interval_steps"}


@dataclass
class SearchSpace:
    """A ``tracegraph tune`` search space read from its JSON file.

    Attributes:
        params: Setting name to its range (``type`` categorical, int or float, with bounds or choices).
        fixed: Settings every trial uses.
        preset: The base preset's name or path, if any.
        pruner: Options for Optuna's median pruner.
        source: The file it was read from.
    """

    params: dict
    fixed: dict = field(default_factory=dict)
    preset: str | None = None
    pruner: dict = field(default_factory=dict)
    source: str = ""


def read_search_space(path: str | Path) -> SearchSpace:
    """Read and check a search-space file.

    Args:
        path: The JSON file.

    Returns:
        The search space.

    Raises:
        DataError: If the file is missing, not a search space of this version, or names an unknown
            setting or a bad range (with the line).
    """
    from tracegraph.kg.model.presets import decode_json, line_of_key, setting_defaults

    p = Path(path)
    if not p.is_file():
        raise DataError("search-space file not found", p)
    data = p.read_bytes()
    doc = decode_json(data, p)
    line = lambda key: line_of_key(data, key)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f'not a search-space file: expected {{"format": "{FORMAT}", ...}}', p, 1)
    if doc.get("version") != VERSION:
        raise DataError(
            f"search-space version {doc.get('version')!r} is not supported (this tracegraph reads {VERSION})",
            p,
            line("version"),
        )
    unknown = set(doc) - {"format", "version", "preset", "fixed", "params", "pruner", "description"}
    if unknown:
        key = sorted(unknown)[0]
        raise DataError(f"unknown key {key!r}", p, line(key))
    names = setting_defaults()
    params, fixed, pruner = doc.get("params"), doc.get("fixed", {}), doc.get("pruner", {})
    if not isinstance(params, dict) or not params:
        raise DataError('"params" must be a non-empty object of setting names to ranges', p, line("params"))
    for key in fixed:
        if key not in names:
            raise DataError(f'unknown setting {key!r} in "fixed"', p, line(key))
    for key, spec in params.items():
        if key not in names and key != SHAPE:
            raise DataError(f'unknown setting {key!r} in "params"', p, line(key))
        problem = _check_spec(key, spec)
        if problem:
            raise DataError(f"{key}: {problem}", p, line(key))
    if not isinstance(pruner, dict) or set(pruner) - PRUNER_KEYS:
        raise DataError(f'"pruner" may only set {", ".join(sorted(PRUNER_KEYS))}', p, line("pruner"))
    return SearchSpace(params, dict(fixed), doc.get("preset"), dict(pruner), str(p))


def _check_spec(key: str, spec) -> str | None:
    if not isinstance(spec, dict):
        return 'expected {"type": "float" | "int" | "categorical", ...}'
    kind = spec.get("type")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            return '"choices" must be a non-empty list'
        if key == SHAPE and not all(_shape(c) for c in choices):
            return 'choices must be strings "HxW" (e.g. "10x20")'
        if not all(c is None or isinstance(c, (bool, int, float, str)) for c in choices):
            return "choices must be numbers, strings, booleans or null"
        return None
    if kind not in ("float", "int"):
        return '"type" must be float, int or categorical'
    if key == SHAPE:
        return f'{SHAPE} is categorical ("HxW" choices)'
    low, high = spec.get("low"), spec.get("high")
    number = (int,) if kind == "int" else (int, float)
    if not all(isinstance(v, number) and not isinstance(v, bool) for v in (low, high)) or not low < high:
        return 'needs numeric "low" < "high"' + (" (integers)" if kind == "int" else "")
    if spec.get("log") and low <= 0:
        return '"log": true needs "low" > 0'
    if set(spec) - {"type", "low", "high", "log", "step"}:
        return f"unknown keys {sorted(set(spec) - {'type', 'low', 'high', 'log', 'step'})}"
    return None


def _shape(choice) -> tuple[int, int] | None:
    if not isinstance(choice, str):
        return None
    parts = choice.lower().split("x")
    if len(parts) != 2 or not all(s.isdigit() and int(s) > 0 for s in parts):
        return None
    return int(parts[0]), int(parts[1])


def suggest(trial, space: SearchSpace) -> dict:
    """Sample one trial's settings.

    Args:
        trial: The Optuna trial.
        space: The search space.

    Returns:
        Train setting names to values (an embedding shape sets height, width and dimension).
    """
    out = {}
    for key, spec in space.params.items():
        kind = spec["type"]
        if kind == "categorical":
            value = trial.suggest_categorical(key, spec["choices"])
        elif kind == "int":
            value = trial.suggest_int(
                key, spec["low"], spec["high"], step=spec.get("step", 1), log=spec.get("log", False)
            )
        else:
            value = trial.suggest_float(
                key, spec["low"], spec["high"], step=spec.get("step"), log=spec.get("log", False)
            )
        if key == SHAPE:
            h, w = _shape(value)
            out.update(embedding_height=h, embedding_width=w, embedding_dim=h * w)
        else:
            out[key] = value
    return out
