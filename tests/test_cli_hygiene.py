"""What a user in a terminal, a pipe or a batch job sees: whole help, one-line errors, progress lines,
uncut tables, and the input forms that just work (.gz, CRLF, a header line)."""

import gzip
import logging

import pytest

from tests.conftest import run_cli, run_cli_error


def leaf_commands():
    import typer.main

    from tracegraph.cli import app

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd

    return list(walk(typer.main.get_command(app), []))


@pytest.mark.parametrize("path,cmd", leaf_commands(), ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_help_is_whole_at_60_columns_when_piped(path, cmd):
    res = run_cli([*path, "--help"], env={"COLUMNS": "60", "TERMINAL_WIDTH": "60"})  # CliRunner: not a TTY
    assert res.exit_code == 0, res.output
    words = set(res.stdout.replace(",", " ").replace("/", " ").split())
    for param in cmd.params:
        for opt in [*param.opts, *param.secondary_opts]:
            if opt.startswith("-"):
                assert opt in words, f"{' '.join(path)} --help lost {opt}"
    assert not [w for w in words if w.startswith("-") and w.endswith("…")] and "<bool>" not in res.stdout


@pytest.mark.parametrize(
    "args,contains",
    [
        (["train", "--train", "x.txt", "-o", "run", "--epochs", "0"], "--epochs"),
        (["train", "--no-such-option"], "No such option: --no-such-option"),
        (["no-such-command"], "No such command"),
        (["data", "get"], "Missing argument"),
    ],
)
def test_option_errors_are_one_error_line(tmp_path, args, contains):
    run_cli_error(args, tmp_path, contains=contains)


def test_tables_are_not_cut_when_piped(tmp_path):
    deep = tmp_path / ("a_rather_long_folder_name_" * 4)
    deep.mkdir()
    f = deep / "train_with_a_long_name.txt"
    f.write_text("a\tr\tb\nb\tr\tc\n")
    res = run_cli(["data", "stats", f])
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stdout.splitlines() if "train_with_a_long_name" in ln)
    assert str(f) in line and "1/1/2" in line  # the whole path and the last column on one line


def test_gz_crlf_and_plain_triples_read_the_same(tmp_path):
    from tracegraph.kg.data.triples import read_labeled_triples

    text = "a\tr\tb\nb\ts\tc\n"
    (tmp_path / "plain.txt").write_text(text)
    (tmp_path / "crlf.txt").write_bytes(text.replace("\n", "\r\n").encode())
    (tmp_path / "packed.txt.gz").write_bytes(gzip.compress(text.replace("\n", "\r\n").encode()))
    read = [read_labeled_triples(tmp_path / n) for n in ("plain.txt", "crlf.txt", "packed.txt.gz")]
    assert all((lt.heads, lt.relations, lt.tails) == (["a", "b"], ["r", "s"], ["b", "c"]) for lt in read)
    (tmp_path / "broken.txt.gz").write_bytes(b"\x1f\x8b not really")
    run_cli_error(
        ["data", "stats", tmp_path / "broken.txt.gz"], tmp_path, contains="broken.txt.gz: not a readable gzip"
    )


@pytest.mark.parametrize(
    "header,skipped",
    [
        ("head\trelation\ttail", True),
        ("subject\tpredicate\tobject", True),
        ("# h\tr\tt", True),
        ("headache\ttreated_by\taspirin", False),
        ("Source\tedge\ttarget", True),
        ("O\tO\tO", False),  # column words, but not head, relation, tail in that order: a triple
        ("t\tr\th", False),
    ],
)
def test_a_header_line_is_skipped_with_a_note(tmp_path, header, skipped, caplog):
    from tracegraph.kg.data.triples import read_labeled_triples
    from tracegraph.runtime.progress import log

    f = tmp_path / "t.txt"
    f.write_text(f"{header}\nx\tr\ty\n")
    caplog.set_level(logging.INFO, logger=log.name)
    log.addHandler(caplog.handler)  # tracegraph's logger does not propagate once the CLI set it up
    try:
        lt = read_labeled_triples(f)
    finally:
        log.removeHandler(caplog.handler)
    assert len(lt) == (1 if skipped else 2) and lt.lines.tolist()[-1] == 2
    assert ("skipped the header line" in caplog.text) == skipped


def test_progress_logs_a_line_every_interval_when_not_a_terminal(monkeypatch):
    from tracegraph.runtime import progress as pg

    monkeypatch.setenv("TRACEGRAPH_LOG_EVERY", "0.000001")
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "0")
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    pg.log.addHandler(handler)
    old_level = pg.log.level
    pg.log.setLevel(logging.INFO)
    try:
        with pg.make_progress() as p:
            task = p.add_task("epoch 1", total=4, info="")
            for i in range(4):
                p.update(task, advance=1, info=f"loss {0.5 / (i + 1):.3f}")
    finally:
        pg.log.removeHandler(handler)
        pg.log.setLevel(old_level)
    assert len(lines) >= 3 and lines[-1].startswith("epoch 1: 4/4 (100%), loss 0.125")


def test_removal_ratio_is_described_never_none():
    from tracegraph.kg.explain.removal import describe_ratio

    assert describe_ratio({"ratio_delta_rr": 1.114}) == "ratio 1.11"
    assert "None" not in describe_ratio({"ratio_delta_rr": None}) and "undefined" in describe_ratio({})


def _logged(caplog):
    """tracegraph's logger into caplog (it does not propagate once the CLI has set it up)."""
    from tracegraph.runtime.progress import log

    caplog.set_level(logging.INFO, logger=log.name)
    log.addHandler(caplog.handler)
    return lambda: log.removeHandler(caplog.handler)


def _bom_cases():
    """Every text reader: (file name, content, read(path) -> a comparable value)."""
    from tracegraph.kg.data.idmap import IdMap, read_name_dict
    from tracegraph.kg.data.labels import read_edge_map
    from tracegraph.kg.data.triples import read_labeled_triples
    from tracegraph.kg.model.presets import load_preset
    from tracegraph.trees.data import read_swc
    from tracegraph.trees.files import read_graph_file
    from tracegraph.trees.labelled import read_labels

    def triples(p):
        lt = read_labeled_triples(p)
        return lt.heads, lt.relations, lt.tails

    def swc(p):
        t = read_swc(p)
        return t.pos.tolist(), t.parent.tolist()

    def graph(p):
        t = read_graph_file(p)
        return t.pos.tolist(), t.parent.tolist()

    return [
        ("triples.txt", "netherlands\tr\tuk\nuk\tr\tnetherlands\n", triples),
        ("node_dict.txt", "netherlands\t0\nuk\t1\n", lambda p: IdMap.read(p).labels),
        ("names.txt", "The Netherlands\t0\nUK\t1\n", read_name_dict),
        ("edge_map.json", '{"{\\"predicate\\": \\"biolink:treats\\"}": "predicate:0"}', read_edge_map),
        ("tree.swc", "1 1 0 0 0 1 -1\n2 3 1 0 0 1 1\n3 3 2 0 0 1 2\n", swc),
        ("tree.json", '{"pos": [[0, 0], [1, 0], [2, 0]], "edges": [[0, 1], [1, 2]], "root": 0}', graph),
        ("labels.csv", "name,label\na,x\nb,y\n", lambda p: [(r.name, r.label) for r in read_labels(p)]),
        (
            "preset.json",
            '{"format": "tracegraph-preset", "version": 1, "settings": {"epochs": 3}}',
            lambda p: load_preset(p).settings,
        ),
    ]


@pytest.mark.parametrize("case", range(8), ids=lambda i: _bom_cases()[i][0])
def test_every_reader_removes_a_byte_order_mark_with_a_note(tmp_path, caplog, case):
    name, text, read = _bom_cases()[case]
    (tmp_path / "plain").mkdir()
    (tmp_path / "bom").mkdir()
    (tmp_path / "plain" / name).write_text(text, encoding="utf-8")
    (tmp_path / "bom" / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
    undo = _logged(caplog)
    try:
        assert read(tmp_path / "bom" / name) == read(tmp_path / "plain" / name)
    finally:
        undo()
    assert f"{tmp_path / 'bom' / name}:1: removed a UTF-8 byte-order mark" in caplog.text


def test_kgx_nodes_with_a_byte_order_mark_import_as_without(tmp_path):
    from tracegraph.kg.data.kgx import import_kgx

    nodes = '{"id": "CHEBI:1", "name": "aspirin"}\n{"id": "MONDO:2", "name": "pain"}\n'
    edges = '{"subject": "CHEBI:1", "predicate": "biolink:treats", "object": "MONDO:2"}\n'
    for d, bom in (("plain", b""), ("bom", b"\xef\xbb\xbf")):
        (tmp_path / d).mkdir()
        (tmp_path / d / "nodes.jsonl").write_bytes(bom + nodes.encode())
        (tmp_path / d / "edges.jsonl").write_bytes(bom + edges.encode())
        import_kgx(tmp_path / d / "nodes.jsonl", tmp_path / d / "edges.jsonl", tmp_path / d / "out")
    for f in ("triples.txt", "node_dict.txt", "node_name_dict.txt", "rel_dict.txt", "edge_map.json"):
        assert (tmp_path / "bom" / "out" / f).read_bytes() == (tmp_path / "plain" / "out" / f).read_bytes()


NATIONS = [
    "brazil",
    "burma",
    "china",
    "cuba",
    "egypt",
    "india",
    "indonesia",
    "israel",
    "jordan",
    "netherlands",
    "poland",
    "uk",
    "usa",
    "ussr",
]


def test_a_training_file_with_a_byte_order_mark_makes_no_phantom_entity(tmp_path, caplog):
    """14 countries, the first line's head (netherlands) also elsewhere in the file: still 14 entities."""
    import tracegraph

    rows = [f"{NATIONS[(9 + i) % 14]}\trel{i % 3}\t{NATIONS[(9 + 5 * i + 1) % 14]}" for i in range(28)]
    assert rows[0].startswith("netherlands") and rows[14].startswith("netherlands")
    (tmp_path / "train.txt").write_bytes(b"\xef\xbb\xbf" + ("\n".join(rows) + "\n").encode())
    (tmp_path / "train.txt").write_bytes((tmp_path / "train.txt").read_bytes() + (rows[3] + "\n").encode())
    undo = _logged(caplog)
    try:
        run = tracegraph.train(
            train=tmp_path / "train.txt",
            output_dir=tmp_path / "run",
            epochs=1,
            device="cpu",
            batch_size=8,
            model=dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=2),
        )
    finally:
        undo()
    assert run.entities.labels == sorted(NATIONS) and run.config["sizes"]["entities"] == 14
    assert f"{tmp_path / 'train.txt'}:1: removed a UTF-8 byte-order mark" in caplog.text
    assert f"train {tmp_path / 'train.txt'}: 29 triples, 1 duplicates" in caplog.text  # rows[3] twice


def test_every_option_of_every_command_is_in_an_option_table():
    """A guard for new commands and options: each option is typed in a command's option table
    (tests/**/test_*_flags_reach_*.py), whose own test checks that it reaches its setting."""
    from pathlib import Path

    tables = "\n".join(p.read_text() for p in Path(__file__).parent.rglob("test_*_flags_reach_*.py"))
    untabled = [
        (" ".join(path), opts[0])
        for path, cmd in leaf_commands()
        for p in cmd.params
        if (opts := [o for o in (*p.opts, *p.secondary_opts) if o.startswith("--")])
        and not any(f'"{o}"' in tables for o in opts)
    ]
    assert not untabled
