"""Every option of `data stats`, `data split`, `data import-kgx`, `data list` and `data get` reaches its setting.

Each command's worker (`triple_stats`, `split_file` and `split_notes`, `import_kgx`, `split_paths`) is a
recording stand-in bound by the real function's parameter names: nothing is counted, split, imported or
downloaded. `--json` lands in what is printed; `data get`'s folder in where `atomic_path` writes. The
tables are written from the options' help, not read from the code; each option, given alone, must change
its own setting and no other (tests/flag_tables.py), and an option added without a row fails.
"""

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.flag_tables import misrouted, options_of, plain, stand_in, tabled

DEGREE = {"min": 1, "median": 1.0, "max": 1}
COUNTS = dict(triples=1, entities=2, relations=1, duplicate_triples=0, self_loops=0, degree=DEGREE)
STATS = {"files": {"t.txt": COUNTS}}  # what the stand-in triple_stats returns

# option as typed, the value typed (None: a switch), where it lands, the value expected
STATS_TABLE = [("--json", None, "JSON printed", STATS)]  # the counts as JSON instead of a table
SPLIT = [
    ("--output-dir", "parts", "out_dir", "parts"),  # required: in the base call
    ("--valid-fraction", "0.25", "valid_fraction", 0.25),  # the split's share ...
    ("--valid-fraction", "0.25", "notes' valid fraction", 0.25),  # ... and the one the notes judge by
    ("--test-fraction", "0.3", "test_fraction", 0.3),
    ("--test-fraction", "0.3", "notes' test fraction", 0.3),
    ("--seed", "7", "seed", 7),
    ("--unseen-to-train", None, "unseen_to_train", True),
]
IMPORT_KGX = [("--output-dir", "kgx-out", "out_dir", "kgx-out")]  # required: in the base call
LIST = [("--json", None, "printed as", "json")]
GET = [
    ("--output-dir", "got", "written into", "got"),  # required: in the base call
    ("--from", "https://mirror.example/FB15k-237.tar.gz", "source", "https://mirror.example/FB15k-237.tar.gz"),
]
# the arguments (options_of lists them too): the inputs, each checked to reach its worker in every base call
ELSEWHERE = {"stats": {"files"}, "split": {"file"}, "import-kgx": {"nodes", "edges"}, "list": set(), "get": {"name"}}


@pytest.fixture
def seen(monkeypatch, tmp_path):
    """Stand-ins for the workers; the cache in tmp_path; relative paths land in tmp_path."""
    import tracegraph.kg.data.datasets as datasets
    import tracegraph.kg.data.kgx as kgx
    import tracegraph.kg.data.split as split
    import tracegraph.runtime.checkpoints as checkpoints

    got = {}
    real_atomic_path = checkpoints.atomic_path

    fetched = {s: tmp_path / "cache" / f"{s}.txt" for s in ("train", "valid", "test")}  # as if downloaded
    fetched["train"].parent.mkdir()
    for path in fetched.values():
        path.write_text("a\tr\tb\n")

    def atomic_path(path, suffix=""):
        got.setdefault("written", []).append(Path(path))
        return real_atomic_path(path, suffix)

    monkeypatch.setattr(split, "triple_stats", lambda paths: got.__setitem__("stats", paths) or STATS)
    stand_in(monkeypatch, split, "split_file", got, returns=split.SplitResult([], [], []))
    monkeypatch.setattr(split, "split_notes", lambda res, fractions: got.__setitem__("notes", fractions) or [])
    kgx_result = kgx.KGXImport(triples=0, entities=0, relations=0, nodes_only_in_edges=0)
    stand_in(monkeypatch, kgx, "import_kgx", got, returns=kgx_result)
    stand_in(monkeypatch, datasets, "split_paths", got, returns=fetched)  # nothing downloaded
    monkeypatch.setattr(checkpoints, "atomic_path", atomic_path)
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.txt").write_text("a\tr\tb\n")
    (tmp_path / "x_nodes.tsv").write_text("id\tname\tcategory\na\tA\tbiolink:Gene\n")
    (tmp_path / "x_edges.tsv").write_text("subject\tpredicate\tobject\na\tbiolink:related_to\ta\n")
    return got


def _ok(*args):
    res = run_cli(["data", *args])
    assert res.exit_code == 0, res.output
    return res


def _json_or_none(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


@pytest.mark.parametrize(
    "command,table",
    [("stats", STATS_TABLE), ("split", SPLIT), ("import-kgx", IMPORT_KGX), ("list", LIST), ("get", GET)],
)
def test_every_option_is_in_its_table(command, table):
    assert options_of("data", command) - ELSEWHERE[command] == tabled(table)


def test_stats_json_prints_the_counts_as_json_instead_of_a_table(seen):
    def invoke(extra):
        return _ok("stats", "t.txt", *extra)

    assert misrouted(STATS_TABLE, invoke, lambda res, where: _json_or_none(res.stdout)) == {}
    assert seen["stats"] == [Path("t.txt")]  # the files given, counted


def test_each_split_option_alone_changes_its_own_setting(seen):
    def invoke(extra):
        _ok("split", "t.txt", "-o", "parts", *extra)
        assert seen["split_file"]["path"] == Path("t.txt")
        notes = seen["notes"]
        return {**seen["split_file"], "notes' valid fraction": notes["valid"], "notes' test fraction": notes["test"]}

    assert misrouted(SPLIT, invoke, lambda got, w: plain(got[w]), fixed={"--output-dir"}) == {}


@pytest.mark.parametrize("given", ["files", "folder"])
def test_import_kgx_output_dir_reaches_the_import(seen, given):
    """Given as the two files or as their folder, the pair reaches the import, and -o its out_dir."""
    inputs = ["x_nodes.tsv", "x_edges.tsv"] if given == "files" else ["."]

    def invoke(extra):
        _ok("import-kgx", *inputs, "-o", "kgx-out", *extra)
        got = seen["import_kgx"]
        assert [Path(got[f]).name for f in ("nodes_path", "edges_path")] == ["x_nodes.tsv", "x_edges.tsv"]
        return got

    assert misrouted(IMPORT_KGX, invoke, lambda got, w: plain(got[w]), fixed={"--output-dir"}) == {}


def test_list_json_prints_json_instead_of_a_table(seen, tmp_path):
    def invoke(extra):
        return _ok("list", *extra).stdout

    def printed_as(out, where):
        return "json" if _json_or_none(out) is not None else "table"

    assert misrouted(LIST, invoke, printed_as) == {}
    assert json.loads(invoke(["--json"]))["cache_dir"] == str(tmp_path / "cache")  # $TRACEGRAPH_CACHE_DIR


def test_each_get_option_alone_changes_its_own_setting(seen):
    def invoke(extra):
        seen["written"] = []
        _ok("get", "fb15k-237", "-o", "got", *extra)
        assert seen["split_paths"]["name"] == "fb15k-237"
        (folder,) = {str(p.parent) for p in seen["written"]}  # all three splits into one folder
        assert sorted(p.name for p in seen["written"]) == ["test.txt", "train.txt", "valid.txt"]
        return {"source": seen["split_paths"]["source"], "written into": folder}

    assert misrouted(GET, invoke, lambda got, w: got[w], fixed={"--output-dir"}) == {}
    assert (Path("got") / "train.txt").read_text() == "a\tr\tb\n"  # the fetched file, copied
