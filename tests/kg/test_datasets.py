"""Datasets by name: `data list`, `data get` (bundled, fetched into the cache, --from a mirror), --dataset."""

import hashlib
import http.server
import io
import json
import tarfile
import threading

import pytest

from tests.conftest import run_cli, run_cli_error, snapshot
from tracegraph.kg.data import datasets
from tracegraph.kg.data.datasets import DATASETS, Dataset, cached_path

TINY_SPLITS = {
    "train.txt": "a\tr\tb\nb\tr\tc\nc\ts\ta\nd\ts\ta\n",
    "valid.txt": "a\ts\tc\n",
    "test.txt": "b\tr\ta\nc\tr\td\n",
}


def make_archive(path, files=TINY_SPLITS, prefix="tiny/"):
    """A tar.gz laid out like the ConvE authors' archives (a folder holding the splits)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def tiny_registry(tmp_path, monkeypatch):
    """A registered 'tiny' dataset whose published address is a local tar.gz (no network)."""
    archive = tmp_path / "mirror" / "tiny.tar.gz"
    archive.parent.mkdir()
    sha = make_archive(archive)
    ds = Dataset("tiny", "test set", 4, 2, (4, 1, 2), "n/a", archive.as_uri(), sha)
    monkeypatch.setitem(DATASETS, "tiny", ds)
    return ds, archive


def count_lines(path):
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def test_data_list_names_sources_sizes_and_published_mrr():
    res = run_cli(["data", "list", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)["datasets"]}
    assert {"umls", "fb15k-237", "wn18rr"} <= set(rows)
    assert rows["umls"]["source"] == "bundled" and rows["umls"]["available"]
    assert rows["fb15k-237"]["sha256"].startswith("311df793") and rows["fb15k-237"]["entities"] == 14541
    assert rows["wn18rr"]["conve_mrr"].startswith("0.43")
    table = run_cli(["data", "list"])  # piped (not a TTY): every column whole, one row per line
    assert any(line.count("fb15k-237") and "272115/17535/20466" in line for line in table.stdout.splitlines())


def test_get_bundled_umls_matches_the_package(tmp_path, umls_dir):
    res = run_cli(["data", "get", "umls", "-o", tmp_path / "u"])
    assert res.exit_code == 0, res.output
    for split in ("train", "valid", "test"):
        assert (tmp_path / "u" / f"{split}.txt").read_bytes() == (umls_dir / f"{split}.txt").read_bytes()
    assert "train 5216  valid 652  test 661" in res.stdout


def test_get_downloads_into_the_cache_once(tiny_registry, tmp_path):
    ds, archive = tiny_registry
    res = run_cli(["data", "get", "tiny", "-o", tmp_path / "out"])
    assert res.exit_code == 0, res.output
    for name, text in TINY_SPLITS.items():
        assert (tmp_path / "out" / name).read_text() == text
        assert (cached_path(ds) / name).read_text() == text
    archive.unlink()  # the second get needs no source: the cache answers
    res = run_cli(["data", "get", "tiny", "-o", tmp_path / "again"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in cached_path(ds).parent.iterdir()) == [cached_path(ds).name]  # no temp files


def test_wrong_checksum_is_an_error_naming_both_hashes_and_caches_nothing(tiny_registry, tmp_path):
    ds, _ = tiny_registry
    other = tmp_path / "other.tar.gz"
    got = make_archive(other, dict(TINY_SPLITS, **{"test.txt": "c\tr\ta\n"}))
    cache = datasets.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    run_cli_error(
        ["data", "get", "tiny", "--from", other, "-o", tmp_path / "out"],
        cache,
        tmp_path / "out",
        contains=f"expected sha256 {ds.sha256}, got {got}",
    )
    assert not cached_path(ds).exists()


class _TruncatingHandler(http.server.BaseHTTPRequestHandler):
    """Promises the whole archive, sends half of it, and hangs up: an interrupted download."""

    payload = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.payload)))
        self.end_headers()
        self.wfile.write(self.payload[: len(self.payload) // 2])
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


def test_interrupted_download_leaves_no_cache_entry(tiny_registry, tmp_path):
    ds, archive = tiny_registry
    _TruncatingHandler.payload = archive.read_bytes()
    server = http.server.HTTPServer(("127.0.0.1", 0), _TruncatingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/tiny.tar.gz"
        cache = datasets.cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        run_cli_error(
            ["data", "get", "tiny", "--from", url, "-o", tmp_path / "out"],
            cache,
            tmp_path / "out",
            contains="interrupted",
        )
    finally:
        server.shutdown()
        server.server_close()
    assert not cached_path(ds).exists()
    assert not any(cache.rglob("*")) or all(p.is_dir() for p in cache.rglob("*"))  # no partial file anywhere


def test_archive_without_the_splits_is_refused(tiny_registry, tmp_path, monkeypatch):
    ds, _ = tiny_registry
    bad = tmp_path / "bad.tar.gz"
    sha = make_archive(bad, {"train.txt": "a\tr\tb\n"})
    monkeypatch.setitem(DATASETS, "tiny", Dataset("tiny", "", 2, 1, (1, 0, 0), "n/a", bad.as_uri(), sha))
    res = run_cli_error(["data", "get", "tiny", "-o", tmp_path / "out"], tmp_path / "out", contains="archive lacks")
    assert "valid.txt, test.txt" in res.stderr
    assert not cached_path(DATASETS["tiny"]).exists()


def test_unknown_dataset_and_missing_source(tmp_path):
    run_cli_error(["data", "get", "nope", "-o", tmp_path / "o"], tmp_path, contains="unknown dataset 'nope'")
    run_cli_error(
        ["data", "get", "wn18rr", "--from", tmp_path / "absent.tar.gz", "-o", tmp_path / "o"],
        tmp_path,
        contains="archive not found",
    )


@pytest.mark.slow
def test_train_and_evaluate_take_dataset_names(tiny_registry, tmp_path):
    ds, _ = tiny_registry
    out = tmp_path / "run"
    tiny = ["--embedding-dim", "12", "--embedding-height", "3", "--embedding-width", "4", "--output-channels", "2"]
    res = run_cli(["train", "--dataset", "tiny", "--epochs", "1", "--batch-size", "4", "-o", out, *tiny])
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["train"]["train"] == str(cached_path(ds) / "train.txt")
    assert cfg["sizes"]["test_triples"] == 2 and cfg["sizes"]["valid_triples"] == 1
    res = run_cli(["evaluate", "--model-dir", out, "--dataset", "tiny", "-o", tmp_path / "ev"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "ev" / "evaluation.json").read_text())["metrics"]["tail"]["count"] == 2
    run_cli_error(["train", "-o", tmp_path / "r2"], tmp_path, contains="give --train FILE or --dataset NAME")


@pytest.mark.parametrize("name", ["fb15k-237", "wn18rr"])
def test_get_from_the_local_benchmark_mirror(benchmark_mirror, tmp_path, name):
    ds = DATASETS[name]
    archive = benchmark_mirror / ds.url.rsplit("/", 1)[1]
    before = snapshot(benchmark_mirror)
    res = run_cli(["data", "get", name, "--from", archive, "-o", tmp_path / name])
    assert res.exit_code == 0, res.output
    counts = tuple(count_lines(tmp_path / name / f"{s}.txt") for s in ("train", "valid", "test"))
    assert counts == ds.triples
    assert snapshot(benchmark_mirror) == before


def test_unwritable_cache_is_a_clean_error(tiny_registry, tmp_path, monkeypatch):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")  # a file where the cache dir should be: unwritable for root too
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(blocker))
    run_cli_error(["data", "get", "tiny", "-o", tmp_path / "out"], tmp_path, contains="cannot write the dataset cache")
