"""Readable names of a run's entities and relations, from the label files recorded beside its
training file: which files are recorded, how names are placed by index, which files are left out
(gone, changed, or names whose index file is gone), and how a name given on the command line is
turned back into a label (unique, ambiguous, unknown).

Every expected value is worked by hand from the small files written here."""

import hashlib
import json
import logging
import os

import pytest

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.data.labels import RunLabels, record_label_files, run_labels
from tracegraph.kg.data.idmap import IdMap, UnknownLabelError

AFFECTS_UP = "biolink:affects (object_direction_qualifier=increased)"
AFFECTS_DOWN = "biolink:affects (object_direction_qualifier=decreased)"
EDGE_MAP = {
    '{"predicate": "biolink:treats"}': "predicate:0",
    '{"predicate": "biolink:affects", "object_direction_qualifier": "increased"}': "predicate:1",
    '{"predicate": "biolink:affects", "object_direction_qualifier": "decreased"}': "predicate:2",
}


def _data(folder, node_dict=True, names=True, edge_map=True):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text("e1\tpredicate:0\te2\n")
    if node_dict:
        (folder / "node_dict.txt").write_text("e1\t0\ne2\t1\ne3\t2\n")
    if names:  # index 3 is one past the last entity: no entity to name
        (folder / "node_name_dict.txt").write_text("Aspirin\t0\nWater\t2\nNobody\t3\n")
    if edge_map:
        (folder / "edge_map.json").write_text(json.dumps(EDGE_MAP))
    return folder / "train.txt"


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_record_holds_each_label_file_beside_the_training_file(tmp_path):
    train = _data(tmp_path / "data")
    run = tmp_path / "run"
    rec = record_label_files(train, run)
    want = {
        key: {
            "path": str((tmp_path / "data" / name).resolve()),
            "relative": os.path.join("..", "data", name),
            "sha256": _sha(tmp_path / "data" / name),
        }
        for key, name in [
            ("node_names", "node_name_dict.txt"),
            ("node_dict", "node_dict.txt"),
            ("edge_map", "edge_map.json"),
        ]
    }
    assert rec == want


@pytest.mark.parametrize(
    "present, recorded",
    [
        (dict(node_dict=True, names=False, edge_map=True), {"edge_map"}),  # the index file alone is of no use
        (dict(node_dict=False, names=True, edge_map=False), {"node_names"}),
        (dict(node_dict=False, names=False, edge_map=False), set()),
    ],
)
def test_record_keeps_the_index_file_only_with_the_names(tmp_path, present, recorded):
    assert set(record_label_files(_data(tmp_path / "d", **present), tmp_path / "run")) == recorded


def _config(train, run):
    return {"label_files": record_label_files(train, run)}


def test_names_are_placed_by_the_recorded_index_file_and_relations_described(tmp_path):
    train, run = _data(tmp_path / "data"), tmp_path / "run"
    run_order = IdMap(["e3", "e1", "e2"])  # the run's own order differs from node_dict.txt
    labels = run_labels(run, _config(train, run), run_order)
    assert labels.entity_names == {"e1": "Aspirin", "e3": "Water"}
    assert labels.relation_names == {
        "predicate:0": "biolink:treats",
        "predicate:1": AFFECTS_UP,
        "predicate:2": AFFECTS_DOWN,
    }


def test_without_an_index_file_names_follow_the_run_entity_order(tmp_path):
    train, run = _data(tmp_path / "data", node_dict=False, edge_map=False), tmp_path / "run"
    labels = run_labels(run, _config(train, run), IdMap(["e3", "e1", "e2"]))
    assert labels.entity_names == {"e3": "Aspirin", "e2": "Water"} and labels.relation_names == {}


def test_a_moved_run_with_its_data_finds_its_label_files(tmp_path):
    train, run = _data(tmp_path / "old" / "data"), tmp_path / "old" / "run"
    config = _config(train, run)
    (tmp_path / "old").rename(tmp_path / "new")  # the recorded absolute paths lead nowhere now
    labels = run_labels(tmp_path / "new" / "run", config, IdMap(["e1", "e2", "e3"]))
    assert labels.entity_names == {"e1": "Aspirin", "e3": "Water"} and len(labels.relation_names) == 3


def test_a_changed_label_file_is_left_out_with_a_warning(tmp_path, caplog):
    train, run = _data(tmp_path / "data"), tmp_path / "run"
    config = _config(train, run)
    (tmp_path / "data" / "edge_map.json").write_text("{}")
    with caplog.at_level(logging.WARNING):
        labels = run_labels(run, config, IdMap(["e1", "e2", "e3"]))
    assert labels.relation_names == {} and labels.entity_names == {"e1": "Aspirin", "e3": "Water"}
    assert caplog.messages == [
        f"{(tmp_path / 'data' / 'edge_map.json').resolve()}: the run's edge map file is "
        "missing or changed; labels are shown without its names"
    ]


def test_names_whose_index_file_is_gone_are_left_out_rather_than_misplaced(tmp_path, caplog):
    train, run = _data(tmp_path / "data"), tmp_path / "run"
    config = _config(train, run)
    (tmp_path / "data" / "node_dict.txt").unlink()
    with caplog.at_level(logging.WARNING):
        labels = run_labels(run, config, IdMap(["e1", "e2", "e3"]))
    assert labels.entity_names == {} and len(labels.relation_names) == 3
    assert caplog.messages == [
        f"{(tmp_path / 'data' / 'node_dict.txt').resolve()}: the run's node dict file is "
        "missing or changed; labels are shown without its names"
    ]


@pytest.mark.parametrize("config", [{}, {"label_files": None}, {"label_files": {}}])
def test_a_run_without_label_files_has_no_names(tmp_path, config):
    assert run_labels(tmp_path, config, IdMap(["e1"])) == RunLabels()


RELATIONS = IdMap(["predicate:0", "predicate:1", "predicate:2", "predicate:3"])


def _rel_labels():
    return RunLabels(
        relation_names={
            "predicate:0": "biolink:treats",
            "predicate:1": AFFECTS_UP,
            "predicate:2": AFFECTS_DOWN,
            "predicate:3": "biolink:causes",
            "predicate:9": "biolink:prevents",
        }
    )  # 9: not a relation of this run


def test_a_relation_is_found_by_its_label_its_full_name_or_its_predicate_alone():
    labels = _rel_labels()
    assert labels.relation("predicate:2", RELATIONS) == "predicate:2"
    assert labels.relation(AFFECTS_UP, RELATIONS) == "predicate:1"
    assert labels.relation("biolink:treats", RELATIONS) == "predicate:0"
    with_plain = RunLabels(relation_names={"predicate:0": "biolink:affects", "predicate:1": AFFECTS_UP})
    assert with_plain.relation("biolink:affects", RELATIONS) == "predicate:0"  # an exact name wins


def test_a_predicate_shared_by_qualified_relations_is_refused_listing_them():
    with pytest.raises(TracegraphError) as e:
        _rel_labels().relation("biolink:affects", RELATIONS)
    assert str(e.value) == (
        f"relation 'biolink:affects' names 2 relations (its qualifiers differ): "
        f"predicate:1 = {AFFECTS_UP}; predicate:2 = {AFFECTS_DOWN}; give one of their labels"
    )


@pytest.mark.parametrize("text", ["biolink:prevents", "biolink:unknown"])
def test_a_relation_name_this_run_does_not_have_is_unknown(text):
    with pytest.raises(UnknownLabelError, match=rf"^relation '{text}' is not in the id map"):
        _rel_labels().relation(text, RELATIONS)


ENTITIES = IdMap(["e1", "e2", "e3", "e4", "e5", "e6", "e7"])


def test_an_entity_is_found_by_its_label_or_a_name_only_it_has():
    labels = RunLabels(entity_names={"e1": "Aspirin", "e2": "Water", "e3": "Water"})
    assert labels.entity("e2", ENTITIES) == "e2"
    assert labels.entity("Aspirin", ENTITIES) == "e1"


def test_a_name_shared_by_entities_is_refused_showing_at_most_five():
    labels = RunLabels(entity_names={"e1": "Aspirin", "e2": "Water", "e3": "Water"})
    with pytest.raises(TracegraphError) as e:
        labels.entity("Water", ENTITIES)
    assert str(e.value) == "entity 'Water' is the name of 2 entities (e2, e3); give its label"
    many = RunLabels(entity_names={f"e{i}": "Salt" for i in range(1, 8)})
    with pytest.raises(TracegraphError) as e:
        many.entity("Salt", ENTITIES)
    assert str(e.value) == "entity 'Salt' is the name of 7 entities (e1, e2, e3, e4, e5); give its label"


def test_an_entity_name_nobody_has_is_unknown():
    with pytest.raises(UnknownLabelError, match=r"^entity 'Vinegar' is not in the id map"):
        RunLabels(entity_names={"e1": "Aspirin"}).entity("Vinegar", ENTITIES)


def test_a_predicate_is_the_name_up_to_its_first_qualifier_bracket():
    labels = RunLabels(
        relation_names={
            "predicate:0": "located in (qualifier=x)",  # a raw edge-map key may hold spaces
            "predicate:1": "biolink:affects (object_aspect_qualifier=activity (or abundance))",
        }
    )
    assert labels.relation("located in", RELATIONS) == "predicate:0"
    assert labels.relation("biolink:affects", RELATIONS) == "predicate:1"


def test_a_recorded_index_file_that_cannot_be_read_is_an_error_naming_it(tmp_path):
    train, run = _data(tmp_path / "data"), tmp_path / "run"
    (tmp_path / "data" / "node_dict.txt").write_text("")  # recorded as it is: empty
    with pytest.raises(DataError) as e:
        run_labels(run, _config(train, run), IdMap(["e1"]))
    assert str(e.value) == f"{(tmp_path / 'data' / 'node_dict.txt').resolve()}: entity map is empty"


def test_a_recorded_path_the_system_refuses_falls_back_to_the_run_relative_one(tmp_path):
    train, run = _data(tmp_path / "data"), tmp_path / "run"
    config = _config(train, run)
    for entry in config["label_files"].values():
        entry["path"] = str(tmp_path / ("x" * 300) / "file")  # a name too long: stat raises, not False
    labels = run_labels(run, config, IdMap(["e1", "e2", "e3"]))
    assert labels.entity_names == {"e1": "Aspirin", "e3": "Water"} and len(labels.relation_names) == 3
