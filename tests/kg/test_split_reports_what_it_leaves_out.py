"""What `data split` says about the valid/test triples train cannot rank (an entity or the relation
unseen in train): per split, how many of how many, why, and the first examples; with
--unseen-to-train they move into train instead; an empty valid or test file is warned of, and a
split that leaves train empty is refused. The references are plain loops over the split's sets."""

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli, run_cli_error
from tracegraph.kg.data.split import split_notes, split_triples
from tracegraph.kg.data.triples import LabeledTriples, read_labeled_triples


def _lt(rows):
    h, r, t = (list(x) for x in zip(*rows))
    return LabeledTriples(h, r, t, np.arange(1, len(rows) + 1), "mem")


def _write(path, rows):
    path.write_text("".join("\t".join(x) + "\n" for x in rows))
    return path


def _read(path):
    if not path.stat().st_size:
        return []
    lt = read_labeled_triples(path)
    return list(zip(lt.heads, lt.relations, lt.tails))


def _why(x, train):
    """What of triple x the train triples lack, in words (the naive restatement)."""
    ents = {e for h, _, t in train for e in (h, t)}
    rels = {r for _, r, _ in train}
    lacking = [repr(e) for e in dict.fromkeys((x[0], x[2])) if e not in ents]
    lacking += [f"relation {x[1]!r}"] if x[1] not in rels else []
    return f"{' and '.join(lacking)} not in train" if lacking else None


# a core every split keeps in train (dense), plus leaves and one-off relations that a cut leaves unseen
CORE = [(f"c{i}", "r", f"c{j}") for i in range(6) for j in range(6) if i != j]
LEAVES = [("c0", "r", f"leaf{i}") for i in range(8)] + [("c1", f"once{i}", "c2") for i in range(4)]


def test_each_split_says_how_many_it_dropped_why_and_names_the_first_three(tmp_path):
    rows = CORE + LEAVES
    cut = ["--valid-fraction", "0.25", "--test-fraction", "0.25", "--seed", "10"]
    res = run_cli(["data", "split", _write(tmp_path / "all.txt", rows), "-o", tmp_path / "o", *cut])
    assert res.exit_code == 0, res.output
    train = _read(tmp_path / "o" / "train.txt")
    planned = split_triples(_lt(rows), 0.25, 0.25, 10)  # the cut itself; its drops are checked naively below
    notes = [line for line in res.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == sum(1 for name in ("valid", "test") if planned.dropped[name])
    for name in ("valid", "test"):
        held = getattr(planned, name) + planned.dropped[name]
        dropped = [x for x in held if _why(x, train)]
        assert _read(tmp_path / "o" / f"{name}.txt") == [x for x in held if not _why(x, train)]
        if not dropped:
            continue
        (note,) = [n for n in notes if n.startswith(f"note: {name}: ")]
        lack_entity = sum("'" in _why(x, train).split("relation")[0] for x in dropped)
        lack_relation = sum("relation" in _why(x, train) for x in dropped)
        examples = "; ".join(f"{h} {r} {t} ({_why((h, r, t), train)})" for h, r, t in dropped[:3])
        assert note == (
            f"note: {name}: dropped {len(dropped)} of {len(held)} triples whose entity or relation train lacks "
            f"({lack_entity} lack an entity, {lack_relation} the relation), e.g. {examples}; "
            "--unseen-to-train moves them into train instead"
        )
    for note in notes:  # this seed shows both reasons among each split's first three
        assert "relation 'once" in note and "'leaf" in note


def test_unseen_to_train_moves_exactly_the_dropped_triples_into_train(tmp_path):
    rows = CORE + LEAVES
    src = _write(tmp_path / "all.txt", rows)
    for flag, out in (([], "dropping"), (["--unseen-to-train"], "moving")):
        res = run_cli(["data", "split", src, "-o", tmp_path / out, "--seed", "4", *flag])
        assert res.exit_code == 0, res.output
    files = {
        out: {n: _read(tmp_path / out / f"{n}.txt") for n in ("train", "valid", "test")}
        for out in ("dropping", "moving")
    }
    dropped = set(rows) - {x for part in files["dropping"].values() for x in part}
    assert dropped, "the example drops nothing: it cannot show a move"
    assert Counter(files["moving"]["train"]) == Counter(files["dropping"]["train"] + sorted(dropped))
    for name in ("valid", "test"):
        assert files["moving"][name] == files["dropping"][name]
    assert "moved " in res.stderr and "into train" in res.stderr and "dropped" not in res.stderr


triple = st.tuples(st.sampled_from("abcdefg"), st.sampled_from(["r", "s", "t"]), st.sampled_from("abcdefg"))


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(triple, min_size=1, max_size=50), seed=st.integers(0, 5))
def test_with_unseen_to_train_every_triple_lands_once_and_train_covers_valid_and_test(rows, seed):
    res = split_triples(_lt(rows), 0.2, 0.2, seed, unseen_to_train=True)
    assert Counter(res.train + res.valid + res.test) == Counter(set(rows))
    assert res.dropped == {"valid": [], "test": []}
    for x in res.valid + res.test:
        assert _why(x, res.train) is None
    plain = split_triples(_lt(rows), 0.2, 0.2, seed)
    assert res.moved == plain.dropped and (res.valid, res.test) == (plain.valid, plain.test)


def test_an_empty_valid_or_test_file_is_warned_of_with_its_reason(tmp_path):
    star = _write(tmp_path / "star.txt", [("hub", "r", f"leaf{i}") for i in range(10)])  # every leaf once
    res = run_cli(["data", "split", star, "-o", tmp_path / "a", "--valid-fraction", "0.2"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "a" / "valid.txt").read_text() == "" == (tmp_path / "a" / "test.txt").read_text()
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: valid.txt is empty (all 2 of its triples were dropped); `train` and `evaluate` refuse an "
        "empty file: leave --valid out, or split again with a larger --valid-fraction or --unseen-to-train",
        "warning: test.txt is empty (its one triple was dropped); `train` and `evaluate` refuse an "
        "empty file: leave --test out, or split again with a larger --test-fraction or --unseen-to-train",
    ]
    moved = run_cli(["data", "split", star, "-o", tmp_path / "b", "--valid-fraction", "0.2", "--unseen-to-train"])
    assert "warning: valid.txt is empty (all 2 of its triples were moved to train)" in moved.stderr
    few = run_cli(["data", "split", star, "-o", tmp_path / "c", "--valid-fraction", "0.01", "--test-fraction", "0"])
    assert few.stderr.splitlines() == [
        "warning: valid.txt is empty (a fraction of 0.01 of 10 triples rounds to none); `train` and "
        "`evaluate` refuse an empty file: leave --valid out, or split again with a larger --valid-fraction"
    ]  # no word about test: a fraction of 0 asks for an empty file


def test_a_split_that_leaves_train_empty_is_refused(tmp_path):
    two = _write(tmp_path / "two.txt", [("a", "r", "b"), ("a", "r", "c")])
    run_cli_error(
        ["data", "split", two, "-o", tmp_path / "o", "--valid-fraction", "0.3", "--test-fraction", "0.3"],
        tmp_path,
        contains="no triple of 2 is left for train: lower the valid and test fractions (0.3 and 0.3)",
    )


def test_notes_of_a_split_with_nothing_held_out_are_empty():
    res = split_triples(_lt(CORE), 0.1, 0.1, 0)
    assert not res.dropped["valid"] and not res.dropped["test"]
    assert split_notes(res, {"valid": 0.1, "test": 0.1}) == []
