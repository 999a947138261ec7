"""Fetching a dataset archive: stream, hash, check, unpack — all or nothing.

The archive is streamed into a temporary file beside the cache entry while its sha256 is
computed; a mismatch or an interrupted transfer deletes it. The wanted members are unpacked into
a temporary directory that is renamed onto the entry only when every file is there, so the cache
holds either the whole dataset or nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator

from tracegraph.errors import DataError, TracegraphError

_CHUNK = 1 << 20


@contextlib.contextmanager
def open_source(source: str) -> Iterator[tuple[BinaryIO, int | None]]:
    """Open a local path or an http(s)/file URL for reading.

    Args:
        source: The path or URL.

    Yields:
        ``(stream, size)``: a binary stream and its size in bytes, or None if unknown.

    Raises:
        DataError: If a local file does not exist.
        TracegraphError: If the download cannot start.
    """
    if "://" not in source:
        p = Path(source).expanduser()
        if not p.is_file():
            raise DataError("archive not found", p)
        with open(p, "rb") as f:
            yield f, p.stat().st_size
        return
    import urllib.error
    import urllib.request

    try:
        resp = urllib.request.urlopen(source, timeout=60)
    except (urllib.error.URLError, OSError) as e:
        raise TracegraphError(
            f"cannot download {source}: {getattr(e, 'reason', e)} (no network? pass a local copy with --from FILE)"
        ) from None
    with resp:
        length = resp.headers.get("Content-Length")
        yield resp, int(length) if length and length.isdigit() else None


def download(source: str, dest: Path, label: str) -> str:
    """Copy ``source`` to ``dest`` with a progress bar.

    Args:
        source: A local path or URL.
        dest: The file to write.
        label: The progress bar's label.

    Returns:
        The SHA-256 of the bytes copied, as hexadecimal.

    Raises:
        TracegraphError: If the download is interrupted or incomplete.
    """
    import http.client

    from tracegraph.runtime.progress import make_progress

    digest = hashlib.sha256()
    with open_source(source) as (stream, size), open(dest, "wb") as out, make_progress(transient=True) as progress:
        task = progress.add_task(f"{label}", total=size, info="")
        received = 0
        while True:
            try:
                chunk = stream.read(_CHUNK)
            except (OSError, http.client.HTTPException) as e:  # a dropped connection: IncompleteRead, reset
                raise TracegraphError(f"download of {source} interrupted after {received} bytes: {e}") from None
            if not chunk:
                break
            out.write(chunk)
            digest.update(chunk)
            received += len(chunk)
            progress.update(task, advance=len(chunk))
        if size is not None and received != size:
            raise TracegraphError(f"download of {source} interrupted: {received} of {size} bytes")
    return digest.hexdigest()


def fetch_archive(source: str, sha256: str, target: Path, members: list[str], label: str) -> None:
    """Make ``target`` a directory holding ``members`` from the tar.gz archive at ``source``.

    The archive is checked against ``sha256`` and unpacked next to ``target``, which appears only
    once complete; directories created on the way are removed again on failure.

    Args:
        source: A local path or URL of the archive.
        sha256: The archive's expected SHA-256.
        target: The directory to create.
        members: Base names of the files to extract.
        label: The progress bar's label.

    Raises:
        TracegraphError: If the download fails, the checksum differs, or the cache cannot be written.
        DataError: If the archive is not a readable tar.gz or lacks a member.
    """
    created = [p for p in (target.parent, *target.parent.parents) if not p.exists()]  # innermost first
    archive = unpacked = None
    done = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".download", dir=target.parent)
        os.close(fd)
        archive = Path(tmp)
        unpacked = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".unpack", dir=target.parent))
        got = download(source, archive, label)
        if got != sha256:
            raise TracegraphError(
                f"checksum mismatch for {source}: expected sha256 {sha256}, got {got}; nothing was cached"
            )
        _unpack(archive, members, unpacked, source)
        umask = os.umask(0)  # mkdtemp makes 0700; the entry gets what a plain mkdir would
        os.umask(umask)
        os.chmod(unpacked, 0o777 & ~umask)
        os.replace(unpacked, target)
        done = True
    except OSError as e:
        if target.is_dir() and all((target / m).is_file() for m in members):
            done = True  # another process finished the same fetch first: its entry is complete too
            return
        raise TracegraphError(f"cannot write the dataset cache at {target.parent}: {e}") from None
    finally:
        if archive is not None:
            archive.unlink(missing_ok=True)
        if unpacked is not None:
            shutil.rmtree(unpacked, ignore_errors=True)
        if not done:
            _remove_empty(created)  # a failed fetch leaves the cache as it found it


def _remove_empty(dirs: list[Path]) -> None:
    for d in dirs:  # innermost first
        with contextlib.suppress(OSError):
            d.rmdir()


def _unpack(archive: Path, members: list[str], into: Path, source: str) -> None:
    """Extract the wanted members by base name; nothing else is written (no paths from the archive)."""
    found: set[str] = set()
    try:
        with tarfile.open(archive, "r:*") as tar:
            for info in tar:
                name = Path(info.name).name
                if info.isfile() and name in members and name not in found:
                    with tar.extractfile(info) as src, open(into / name, "wb") as dst:
                        shutil.copyfileobj(src, dst, _CHUNK)
                    found.add(name)
    except (tarfile.TarError, EOFError) as e:
        raise DataError(f"not a readable tar archive ({e})", source) from None
    missing = [m for m in members if m not in found]
    if missing:
        raise DataError(f"archive lacks {', '.join(missing)}", source)
