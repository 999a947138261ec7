"""kg/data/datasets/fetch.py by hand: where a fetch keeps its temporaries (hidden, beside the entry,
gone afterwards), the entry's permissions, parents created on the way, a fetch another process
finished first, and the byte count of an interrupted download; `open_source`: a missing local file
named, a URL that cannot be opened named with the reason in the documented wording, never waiting
without a time limit, and the size a server states (none when it states none or something not a
number).

References: a tiny tar.gz built here, its sha256 computed here, a local HTTP server that sends the
headers written in the test, recording stand-ins for `urlopen`, and the rules the docstrings state.
"""

import contextlib
import hashlib
import http.server
import io
import os
import tarfile
import threading
import urllib.error
import urllib.request

import pytest

import tracegraph.kg.data.datasets.fetch as fetch
from tracegraph.errors import DataError, TracegraphError

MEMBERS = ["train.txt", "valid.txt", "test.txt"]


def archive(tmp_path, members=MEMBERS):
    p = tmp_path / "set.tar.gz"
    with tarfile.open(p, "w:gz") as tar:
        for m in members:
            data = f"a\tr\t{m}\n".encode()
            info = tarfile.TarInfo(f"set/{m}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return p, hashlib.sha256(p.read_bytes()).hexdigest()


@contextlib.contextmanager
def umask(mask):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_an_entry_appears_whole_with_a_plain_directorys_permissions_and_no_temporaries(tmp_path, monkeypatch):
    src, sha = archive(tmp_path)
    target = tmp_path / "cache" / "deep" / "set-1234"  # parents created on the way
    seen = {}
    real_download, real_unpack = fetch.download, fetch._unpack
    monkeypatch.setattr(
        fetch, "download", lambda s, dest, label: seen.update(dest=dest, label=label) or real_download(s, dest, label)
    )
    monkeypatch.setattr(
        fetch, "_unpack", lambda a, m, into, s: seen.update(into=into, source=s) or real_unpack(a, m, into, s)
    )
    with umask(0o027):
        fetch.fetch_archive(str(src), sha, target, MEMBERS, "my set")
    assert sorted(p.name for p in target.iterdir()) == sorted(MEMBERS)
    assert (target / "test.txt").read_text() == "a\tr\ttest.txt\n"
    assert oct(target.stat().st_mode & 0o777) == oct(0o750)
    assert list(target.parent.iterdir()) == [target]  # the temporaries are gone
    assert seen["dest"].parent == target.parent and seen["dest"].name.startswith(".set-1234.")
    assert seen["dest"].name.endswith(".download") and seen["label"] == "my set"
    assert seen["into"].parent == target.parent and seen["into"].name.startswith(".set-1234.")
    assert seen["into"].name.endswith(".unpack") and seen["source"] == str(src)


def test_a_parent_that_exists_already_is_used(tmp_path):
    src, sha = archive(tmp_path)
    (tmp_path / "cache").mkdir()
    fetch.fetch_archive(str(src), sha, tmp_path / "cache" / "set", MEMBERS, "x")
    assert (tmp_path / "cache" / "set" / "train.txt").is_file()


def test_a_fetch_another_process_finished_first_is_accepted_an_incomplete_one_is_not(tmp_path):
    src, sha = archive(tmp_path)
    done = tmp_path / "cache" / "set"
    done.mkdir(parents=True)
    for m in MEMBERS:
        (done / m).write_text("theirs\n")
    fetch.fetch_archive(str(src), sha, done, MEMBERS, "x")  # replacing a full directory fails: theirs stands
    assert (done / "train.txt").read_text() == "theirs\n" and sorted(p.name for p in done.parent.iterdir()) == ["set"]
    partial = tmp_path / "cache" / "other"
    partial.mkdir()
    (partial / "train.txt").write_text("half\n")
    with pytest.raises(TracegraphError) as e:
        fetch.fetch_archive(str(src), sha, partial, MEMBERS, "x")
    assert str(e.value).startswith(f"cannot write the dataset cache at {partial.parent}: ")


def test_a_bad_archive_is_named_by_its_source(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tar at all")
    with pytest.raises(DataError) as e:
        fetch.fetch_archive(
            str(bad), hashlib.sha256(bad.read_bytes()).hexdigest(), tmp_path / "c" / "set", MEMBERS, "x"
        )
    assert str(e.value).startswith(f"{bad}: not a readable tar archive (")
    assert not (tmp_path / "c").exists()  # the folder made for it is gone again


class Dropping(io.RawIOBase):
    """Gives two 3-byte chunks, then the connection drops."""

    def __init__(self):
        self.calls = 0

    def read(self, n=-1):
        self.calls += 1
        if self.calls > 2:
            raise ConnectionResetError("reset by peer")
        return b"abc"


def test_an_interrupted_download_says_how_many_bytes_arrived(tmp_path, monkeypatch):
    @contextlib.contextmanager
    def source(_):
        yield Dropping(), None

    monkeypatch.setattr(fetch, "open_source", source)
    with pytest.raises(TracegraphError) as e:
        fetch.download("https://example.org/set.tar.gz", tmp_path / "x", "x")
    assert str(e.value) == "download of https://example.org/set.tar.gz interrupted after 6 bytes: reset by peer"


def test_only_the_named_files_are_unpacked_and_a_missing_one_is_named(tmp_path):
    p = tmp_path / "extra.tar.gz"
    with tarfile.open(p, "w:gz") as tar:
        d = tarfile.TarInfo("set/docs")
        d.type = tarfile.DIRTYPE
        tar.addfile(d)
        for m in [*MEMBERS, "README"]:
            info = tarfile.TarInfo(f"set/{m}")
            info.size = 2
            tar.addfile(info, io.BytesIO(b"x\n"))
    target = tmp_path / "c" / "set"
    fetch.fetch_archive(str(p), hashlib.sha256(p.read_bytes()).hexdigest(), target, MEMBERS, "x")
    assert sorted(q.name for q in target.iterdir()) == sorted(MEMBERS)
    src, sha = archive(tmp_path, MEMBERS[:2])
    with pytest.raises(DataError) as e:
        fetch.fetch_archive(str(src), sha, tmp_path / "c" / "other", MEMBERS, "x")
    assert str(e.value) == f"{src}: archive lacks test.txt"


def test_a_missing_local_archive_is_named(tmp_path):
    missing = tmp_path / "absent.tar.gz"
    with pytest.raises(DataError) as e, fetch.open_source(str(missing)):
        pass
    assert str(e.value) == f"{missing}: archive not found"
    assert e.value.path == str(missing)


def refusing_urlopen(error, calls):
    def urlopen(url, *args, **kwargs):
        calls.append((url, args, kwargs))
        raise error

    return urlopen


@pytest.mark.parametrize(
    "error, reason",
    [
        (urllib.error.URLError("Name or service not known"), "Name or service not known"),
        (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), "[Errno 111] Connection refused"),
        (TimeoutError("timed out"), "timed out"),  # a plain OSError: it has no reason, so itself is shown
    ],
)
def test_a_download_that_cannot_start_is_named_with_its_reason(monkeypatch, error, reason):
    url = "https://example.org/set.tar.gz"
    calls = []
    monkeypatch.setattr(urllib.request, "urlopen", refusing_urlopen(error, calls))
    with pytest.raises(TracegraphError) as e, fetch.open_source(url):
        pass
    assert type(e.value) is TracegraphError
    assert str(e.value) == f"cannot download {url}: {reason} (no network? pass a local copy with --from FILE)"
    assert [c[0] for c in calls] == [url]


def test_a_download_never_waits_without_a_time_limit(monkeypatch):
    calls = []
    monkeypatch.setattr(urllib.request, "urlopen", refusing_urlopen(urllib.error.URLError("down"), calls))
    with pytest.raises(TracegraphError), fetch.open_source("http://example.org/x"):
        pass
    (_, args, kwargs), *_ = calls
    timeout = kwargs.get("timeout", args[1] if len(args) > 1 else None)
    assert isinstance(timeout, (int, float)) and 0 < timeout < float("inf")


@contextlib.contextmanager
def serving(length_header):
    """A local HTTP/1.0 server answering every GET with b"12345" and the Content-Length line given."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            if length_header is not None:
                self.send_header("Content-Length", length_header)
            self.end_headers()
            self.wfile.write(b"12345")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)  # shutdown waits one poll
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/set.tar.gz"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("header, size", [("5", 5), (None, None), ("five", None), ("-5", None), ("", None)])
def test_the_size_is_the_one_the_server_states_or_none(header, size):
    with serving(header) as url, fetch.open_source(url) as (stream, got):
        assert got == size
        assert stream.read() == b"12345"
