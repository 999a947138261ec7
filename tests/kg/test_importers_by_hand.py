"""Importers of PyKEEN models and of the original research scripts' checkpoints, by hand, without PyKEEN.

Holds ``kg/model/importers.py`` to what its module docstring and ``docs/import.md`` promise, on
tiny state dicts, triples-factory folders and checkpoints written out in the test: the key-by-key
mapping and PyKEEN's row order (r at 2r, r⁻¹ at 2r+1 → r, R+r) against the documented table;
imported scores against a float64 forward pass of PyKEEN's ConvE written here from its layer
list (``hr2d``: BatchNorm2d, Dropout, Conv2d, BatchNorm2d, ReLU, Dropout2d; ``hr1d``: Linear,
Dropout, BatchNorm1d, ReLU; height-stacked image; ``x·Eᵀ + b``) and against
``tests/kg/earlier_conve.py``'s reference model; the image shape inferred from weight shapes
against candidates counted by hand; the recorded lr, label smoothing, epoch, notes and source;
every refusal word for word.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import sys
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import log_lines
from tests.kg.earlier_conve import EarlierConvE, earlier_checkpoint
from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.model.conve import ConvEConfig
from tracegraph.kg.model.importers import (
    _find_key,
    earlier_state_to_tracegraph,
    import_checkpoint,
    load_torch_file,
    read_triples_factory_dir,
    write_model_dir,
)
from tracegraph.kg.model.pykeen_import import (
    _infer_image,
    _pykeen_module_info,
    import_pykeen,
    pykeen_state_to_tracegraph,
)
from tracegraph.kg.model.model_io import load_model

HINT = (
    "it is a pickled Python object (e.g. a whole model saved with torch.save(model)); loading it runs "
    "code from the file. If you made this file yourself, pass --trust-pickle"
)
ENT = "entity_representations.0._embeddings.weight"
BIAS = "entity_representations.1._embeddings.weight"
REL = "relation_representations.0._embeddings.weight"
DROPS_NOTE = "dropout rates not in the source: tracegraph defaults used (they do not change scores in eval mode)"


def bn_state(prefix: str, n: int, g: torch.Generator) -> dict:
    return {
        prefix + "weight": torch.rand(n, generator=g) + 0.5,
        prefix + "bias": torch.randn(n, generator=g),
        prefix + "running_mean": torch.randn(n, generator=g),
        prefix + "running_var": torch.rand(n, generator=g) * 1.5 + 0.5,
        prefix + "num_batches_tracked": torch.tensor(3),
    }


def pk_state(N=5, R=3, inverse=True, d=6, C=2, k=3, H=2, W=3, seed=0) -> dict:
    """A PyKEEN ConvE state dict with random weights, keys and shapes as PyKEEN 1.x names them."""
    g = torch.Generator().manual_seed(seed)
    flat = C * (2 * H - k + 1) * (W - k + 1)
    return {
        ENT: torch.randn(N, d, generator=g),
        BIAS: torch.randn(N, 1, generator=g),
        REL: torch.randn(R * (2 if inverse else 1), d, generator=g),
        **bn_state("interaction.hr2d.0.", 1, g),
        "interaction.hr2d.2.weight": torch.randn(C, 1, k, k, generator=g),
        "interaction.hr2d.2.bias": torch.randn(C, generator=g),
        **bn_state("interaction.hr2d.3.", C, g),
        "interaction.hr1d.0.weight": torch.randn(d, flat, generator=g),
        "interaction.hr1d.0.bias": torch.randn(d, generator=g),
        **bn_state("interaction.hr1d.2.", d, g),
    }


def pykeen_scores(s: dict, H: int, W: int, heads, rows) -> torch.Tensor:
    """PyKEEN's ConvE score of every tail, in float64, in eval mode (dropouts are the identity)."""
    s = {k: v.double() for k, v in s.items()}

    def bn(x, p):
        return F.batch_norm(
            x, s[p + "running_mean"], s[p + "running_var"], s[p + "weight"], s[p + "bias"], False, 0.0, 1e-5
        )

    E = s[ENT]
    x = torch.cat([E[heads].view(-1, 1, H, W), s[REL][rows].view(-1, 1, H, W)], dim=2)  # 2H×W
    x = F.conv2d(bn(x, "interaction.hr2d.0."), s["interaction.hr2d.2.weight"], s["interaction.hr2d.2.bias"])
    x = torch.relu(bn(x, "interaction.hr2d.3."))
    x = F.linear(x.reshape(len(heads), -1), s["interaction.hr1d.0.weight"], s["interaction.hr1d.0.bias"])
    x = torch.relu(bn(x, "interaction.hr1d.2."))
    return x @ E.T + s[BIAS].reshape(-1)


def write_maps(d: pathlib.Path, N: int, R: int) -> tuple[pathlib.Path, pathlib.Path]:
    (d / "node_dict.txt").write_text("".join(f"e{i}\t{i}\n" for i in range(N)))
    (d / "rel_dict.txt").write_text("".join(f"r{i}\t{i}\n" for i in range(R)))
    return d / "node_dict.txt", d / "rel_dict.txt"


def gz(path: pathlib.Path, text: str) -> pathlib.Path:
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    return path


def factory_dir(d: pathlib.Path, N=5, R=3, inverse: bool | None = True, triples="") -> pathlib.Path:
    d.mkdir()
    gz(d / "entity_to_id.tsv.gz", "id\tlabel\n" + "".join(f"{i}\tE{i}\n" for i in range(N)))
    gz(d / "relation_to_id.tsv.gz", "id\tlabel\n" + "".join(f"{i}\tP{i}\n" for i in range(R)))
    if inverse is not None:
        torch.save(
            {"create_inverse_triples": inverse, "path": pathlib.PurePosixPath("/data/train.txt")}, d / "base.pth"
        )
    if triples:
        gz(d / "numeric_triples.tsv.gz", "head\trelation\ttail\n" + triples)
    return d


def refusal(kind, call, *args, **kwargs):
    with pytest.raises(kind) as e:
        call(*args, **kwargs)
    return e.value


# --------------------------------------------------------------------------- loading files


def test_load_torch_file_reads_tensors_safely_and_names_a_missing_file(tmp_path):
    f = tmp_path / "sd.pt"
    torch.save({"w": torch.arange(3)}, f)
    assert load_torch_file(f)["w"].tolist() == [0, 1, 2]
    e = refusal(DataError, load_torch_file, tmp_path / "none.pt")
    assert str(e) == f"{tmp_path / 'none.pt'}: file not found"
    e = refusal(DataError, load_torch_file, tmp_path, trust_pickle=True)  # a folder is not a file
    assert str(e) == f"{tmp_path}: file not found"


def test_a_pickle_is_refused_with_one_line_and_the_hint_unless_trusted(tmp_path):
    f = tmp_path / "obj.pt"
    torch.save({"args": argparse.Namespace(seed=1)}, f)
    e = refusal(DataError, load_torch_file, f)
    assert str(e).startswith(f"{f}: cannot load safely (weights_only): ") and str(e).endswith(" — " + HINT)
    assert "\n" not in str(e) and e.line is None
    assert load_torch_file(f, trust_pickle=True)["args"].seed == 1


def recording_load(monkeypatch) -> list:
    """torch.load, recording the path and keyword arguments of every call."""
    calls, real = [], torch.load

    def load(path, **kw):
        calls.append((pathlib.Path(path).name, kw))
        return real(path, **kw)

    monkeypatch.setattr(torch, "load", load)
    return calls


def test_files_are_loaded_weights_only_onto_the_cpu_and_unpickled_only_when_trusted(tmp_path, monkeypatch):
    calls = recording_load(monkeypatch)
    torch.save({"w": torch.ones(1)}, tmp_path / "sd.pt")
    load_torch_file(tmp_path / "sd.pt")
    torch.save({"args": argparse.Namespace(seed=1)}, tmp_path / "obj.pt")
    load_torch_file(tmp_path / "obj.pt", trust_pickle=True)
    d = factory_dir(tmp_path / "tf")
    read_triples_factory_dir(d)
    safe, unsafe = {"map_location": "cpu", "weights_only": True}, {"map_location": "cpu", "weights_only": False}
    assert calls == [("sd.pt", safe), ("obj.pt", safe), ("obj.pt", unsafe), ("base.pth", safe)]


@pytest.mark.parametrize(
    "error,first",
    [
        (RuntimeError("Weights only load failed.\nsecond line\nthird"), "Weights only load failed."),
        (ValueError("  \n "), "ValueError"),
    ],
)
def test_a_refused_safe_load_quotes_the_first_line_of_the_reason_or_its_type(tmp_path, monkeypatch, error, first):
    def load(path, **kw):
        raise error

    monkeypatch.setattr(torch, "load", load)
    (tmp_path / "m.pt").write_bytes(b"x")
    e = refusal(DataError, load_torch_file, tmp_path / "m.pt")
    assert str(e) == f"{tmp_path / 'm.pt'}: cannot load safely (weights_only): {first} — {HINT}"


def test_an_unpicklable_file_says_what_failed(tmp_path):
    f = tmp_path / "junk.pt"
    f.write_bytes(b"not a torch file at all\nsecond line\n")
    e = refusal(DataError, load_torch_file, f)
    assert str(e).startswith(f"{f}: cannot load safely (weights_only): ") and "\n" not in str(e)
    e = refusal(DataError, load_torch_file, f, trust_pickle=True)
    assert str(e).startswith(f"{f}: cannot load: ")


def test_unpickling_a_missing_module_says_which_to_install(tmp_path):
    mod = types.ModuleType("tg_gone_module")

    class Thing:
        pass

    Thing.__module__ = "tg_gone_module"
    Thing.__qualname__ = "Thing"
    mod.Thing = Thing
    sys.modules["tg_gone_module"] = mod
    f = tmp_path / "thing.pt"
    try:
        torch.save(Thing(), f)
    finally:
        del sys.modules["tg_gone_module"]
    e = refusal(DataError, load_torch_file, f, trust_pickle=True)
    assert str(e) == (
        f"{f}: unpickling needs the module 'tg_gone_module': install it "
        "(for PyKEEN models: pip install 'tracegraph[import]')"
    )


# --------------------------------------------------------------------------- triples factory folders


def test_a_factory_folder_gives_maps_flag_and_triples(tmp_path):
    d = factory_dir(tmp_path / "tf", N=3, R=2, inverse=True, triples="2\t1\t0\n\n0\t0\t1\n")
    gz(d / "entity_to_id.tsv.gz", "\ufefflabel\tx\tid\nB\t-\t1\n\nA\t-\t0\nC\t-\t2\n")  # columns in any order
    info = read_triples_factory_dir(d)
    assert info.entities.labels == ["A", "B", "C"] and info.relations.labels == ["P0", "P1"]
    assert info.create_inverse_triples is True and info.notes == []
    assert info.train_ids.tolist() == [[2, 1, 0], [0, 0, 1]] and info.train_ids.dtype == np.int64
    torch.save({"create_inverse_triples": 0}, d / "base.pth")
    assert read_triples_factory_dir(d).create_inverse_triples is False


def test_a_factory_folder_without_base_or_triples_leaves_them_unknown(tmp_path):
    d = factory_dir(tmp_path / "tf", inverse=None)
    info = read_triples_factory_dir(d)
    assert (info.create_inverse_triples, info.train_ids, info.notes) == (None, None, [])


def test_unreadable_metadata_and_triples_become_notes(tmp_path):
    d = factory_dir(tmp_path / "tf", triples="0\t1\n")
    torch.save({"create_inverse_triples": True, "args": argparse.Namespace(a=1)}, d / "base.pth")
    info = read_triples_factory_dir(d)
    assert info.create_inverse_triples is None and info.train_ids is None
    assert info.notes == [
        "base.pth did not load with weights_only; inverse triples inferred from the relation table",
        "numeric_triples.tsv.gz unreadable; no train.txt written",
    ]
    torch.save({"other": 1}, d / "base.pth")  # loads, but holds no flag
    assert read_triples_factory_dir(d).create_inverse_triples is None


def test_factory_files_keep_labels_with_spaces_and_note_byte_order_marks(tmp_path):
    d = factory_dir(tmp_path / "tf", N=2, R=1, inverse=None)
    ent = gz(d / "entity_to_id.tsv.gz", "\ufeffrow name\tid\tlabel\nr 0\t0\tbig apple\nr 1\t1\tpear\n")
    trip = gz(d / "numeric_triples.tsv.gz", "\ufeffhead\trelation\ttail\n0\t0\t1\n")
    # older PyKEEN kept the triples as a tensor in base.pth beside the flag
    torch.save({"mapped_triples": torch.tensor([[0, 0, 1]]), "create_inverse_triples": True}, d / "base.pth")
    with log_lines() as lines:
        info = read_triples_factory_dir(d)
    assert info.entities.labels == ["big apple", "pear"] and info.create_inverse_triples is True
    assert info.train_ids.tolist() == [[0, 0, 1]] and info.notes == []
    assert lines == [f"{ent}:1: removed a UTF-8 byte-order mark", f"{trip}:1: removed a UTF-8 byte-order mark"]


def test_a_bad_factory_folder_is_refused_word_for_word(tmp_path):
    e = refusal(DataError, read_triples_factory_dir, tmp_path / "none")
    assert str(e) == f"{tmp_path / 'none'}: triples factory directory not found"
    d = factory_dir(tmp_path / "tf")
    ent = d / "entity_to_id.tsv.gz"
    cases = [
        ("", None, "empty entity_to_id"),
        ("ident\tlabel\n0\ta\n", 1, "entity_to_id: expected a header with 'id' and 'label', got 'ident\\tlabel'"),
        ("id\tname\n0\ta\n", 1, "entity_to_id: expected a header with 'id' and 'label', got 'id\\tname'"),
        ("id\tlabel\n0\ta\n\nx\tb\n", 4, "entity_to_id: bad row 'x\\tb'"),
        ("label\tid\n0\ta\n", 2, "entity_to_id: bad row '0\\ta'"),
        ("id\tlabel\n0\ta\n\n1\n", 4, "entity_to_id: bad row '1'"),
        ("id\tlabel\n0\ta\n2\tb\n", None, "entity_to_id: ids are not 0..1"),
    ]
    for text, line, reason in cases:
        gz(ent, text)
        e = refusal(DataError, read_triples_factory_dir, d)
        assert (e.path, e.line, e.reason) == (str(ent), line, reason), text
    ent.unlink()
    assert str(refusal(DataError, read_triples_factory_dir, d)) == f"{ent}: entity_to_id not found"
    gz(ent, "id\tlabel\n0\ta\n")
    gz(d / "relation_to_id.tsv.gz", "id\tlabel\n1\tp\n")
    e = refusal(DataError, read_triples_factory_dir, d)
    assert str(e) == f"{d / 'relation_to_id.tsv.gz'}: relation_to_id: ids are not 0..0"


# --------------------------------------------------------------------------- hyper-parameters


def test_find_key_searches_nested_dicts_and_lists_depth_first():
    hp = {"model": "ConvE", "model_kwargs": {"x": 1}, "runs": [{"optimizer_kwargs": {"learning_rate": 0.5}}]}
    assert _find_key(hp, ("lr", "learning_rate")) == 0.5
    assert _find_key({"lr": {"value": 1}, "b": {"lr": 2}}, ("lr",)) == 2  # a dict value is not a value
    assert _find_key({"learning_rate": 3, "lr": 4}, ("lr", "learning_rate")) == 4  # names in the order given
    assert _find_key({"a": {"lr": 5}, "b": {"lr": 6}}, ("lr",)) == 5
    assert _find_key(({"x": 1}, [{"lr": 7}]), ("lr",)) == 7
    assert _find_key({"a": [1, "lr"], "b": None}, ("lr",)) is None
    assert _find_key({"lr": None, "b": {"lr": 8}}, ("lr",)) is None  # a None value is found, and is None
    assert _find_key(3, ("lr",)) is None


def test_the_image_shape_is_inferred_when_one_shape_fits():
    # d = 6, C = 2, k = 3: H×W in 1×6 (2H=2 < k), 2×3 → 2·(4−2)·(3−2) = 4 features, 3×2 and 6×1 (W < k)
    assert _infer_image(6, 2, 3, 3, 4) == (2, 3)
    # d = 4, C = 1, k = 1: 1×4 → 2·4 = 8, 2×2 → 4·2 = 8, 4×1 → 8·1 = 8: three fit
    e = refusal(TracegraphError, _infer_image, 4, 1, 1, 1, 8)
    assert str(e) == (
        "cannot tell the ConvE image shape from the weights (3 candidates [(1, 4), (2, 2), (4, 1)]); "
        "give --hyperparameters JSON with embedding_height and embedding_width"
    )
    assert "(0 candidates [])" in str(refusal(TracegraphError, _infer_image, 6, 2, 3, 3, 5))
    # the edges: 2H = k and W = k fit (d = 4, k = 2, C = 1: 1×4 → 1·1·3 = 3, 2×2 → 3·1 = 3, 4×1 no)
    e = refusal(TracegraphError, _infer_image, 4, 1, 2, 2, 3)
    assert "(2 candidates [(1, 4), (2, 2)])" in str(e)
    assert "(0 candidates [])" in str(refusal(TracegraphError, _infer_image, 4, 1, 2, 2, 6))


def test_the_image_shape_counts_channels_and_both_kernel_sides():
    # d = 8, C = 3, kh = kw = 2: 1×8 → 3·1·7 = 21, 2×4 → 3·3·3 = 27, 4×2 → 3·7·1 = 21, 8×1 (W < k)
    assert _infer_image(8, 3, 2, 2, 27) == (2, 4)
    assert "(2 candidates [(1, 8), (4, 2)])" in str(refusal(TracegraphError, _infer_image, 8, 3, 2, 2, 21))
    # a rectangular kernel: d = 6, kh = 1, kw = 3: 1×6 → 2·4 = 8, 2×3 → 4·1 = 4, 3×2 and 6×1 (W < kw)
    assert _infer_image(6, 1, 1, 3, 4) == (2, 3) and _infer_image(6, 1, 1, 3, 8) == (1, 6)


# --------------------------------------------------------------------------- PyKEEN state dicts


def test_pykeen_state_maps_key_by_key_with_inverse_rows_permuted():
    s = pk_state(N=5, R=3, inverse=True)
    mcfg, out, notes = pykeen_state_to_tracegraph(s, 3)
    assert mcfg == ConvEConfig(
        num_entities=5, num_relations=3, embedding_dim=6, embedding_height=2, embedding_width=3,
        output_channels=2, kernel_size=3, reciprocal=True, entity_bias=True, concat_axis="height",
    )  # fmt: skip
    assert notes == ["image shape 2×3 per embedding inferred from the weight shapes", DROPS_NOTE]
    rows = s[REL]
    assert torch.equal(out["relation.weight"], torch.stack([rows[0], rows[2], rows[4], rows[1], rows[3], rows[5]]))
    assert torch.equal(out["entity.weight"], s[ENT]) and torch.equal(out["entity_bias"], s[BIAS][:, 0])
    assert out["entity_bias"].shape == (5,)
    renamed = {"bn0.": "interaction.hr2d.0.", "conv.": "interaction.hr2d.2.", "bn1.": "interaction.hr2d.3.",
               "fc.": "interaction.hr1d.0.", "bn2.": "interaction.hr1d.2."}  # fmt: skip
    want = {"entity.weight", "entity_bias", "relation.weight"}
    for dst, src in renamed.items():
        for k, v in s.items():
            if k.startswith(src):
                want.add(dst + k[len(src) :])
                assert out[dst + k[len(src) :]] is v
    assert set(out) == want


def test_pykeen_state_without_inverse_rows_maps_them_one_to_one():
    s = pk_state(R=3, inverse=False)
    mcfg, out, _ = pykeen_state_to_tracegraph(s, 3)
    assert mcfg.reciprocal is False and out["relation.weight"] is s[REL]
    # told: a table of R rows is refused for inverse triples, and 2R rows without them
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, s, 3, None, True)
    assert str(e) == "relation table has 3 rows, expected 6 (3 relations, inverse triples on)"
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, pk_state(R=3), 3, None, False)
    assert str(e) == "relation table has 6 rows, expected 3 (3 relations, inverse triples off)"
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, pk_state(R=3), 4)
    assert str(e) == "relation table has 6 rows; the relation map has 4 relations (expected R or 2R rows)"
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, pk_state(R=5, d=6), 4)  # 10 rows of width 6
    assert str(e) == "relation table has 10 rows; the relation map has 4 relations (expected R or 2R rows)"


def test_the_image_shape_and_dropouts_come_from_the_hyper_parameters():
    s = pk_state(d=6, H=2, W=3)
    hp = {
        "embedding_height": 2,
        "embedding_width": 3,
        "input_dropout": "0.1",
        "feature_map_dropout": 0.2,
        "output_dropout": 0,
    }
    mcfg, _, notes = pykeen_state_to_tracegraph(s, 3, hp)
    assert (mcfg.embedding_height, mcfg.embedding_width) == (2, 3) and notes == []
    assert (mcfg.input_dropout, mcfg.feature_map_dropout, mcfg.output_dropout) == (0.1, 0.2, 0.0)
    assert isinstance(mcfg.input_dropout, float)
    mcfg, _, notes = pykeen_state_to_tracegraph(s, 3, {"embedding_height": "2", "input_dropout": 0.5})
    assert (mcfg.embedding_height, mcfg.embedding_width, mcfg.input_dropout) == (2, 3, 0.5) and notes == [DROPS_NOTE]
    assert (mcfg.feature_map_dropout, mcfg.output_dropout) == (
        ConvEConfig.feature_map_dropout,
        ConvEConfig.output_dropout,
    )
    mcfg, _, notes = pykeen_state_to_tracegraph(s, 3, {"embedding_width": 3})
    assert (mcfg.embedding_height, mcfg.embedding_width) == (2, 3) and notes == [DROPS_NOTE]


def test_a_state_that_is_not_a_plain_pykeen_conve_is_refused_word_for_word():
    s = pk_state()
    del s["interaction.hr1d.0.weight"], s[BIAS]
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, s, 3)
    assert str(e) == f"not a PyKEEN ConvE state (missing {BIAS}, interaction.hr1d.0.weight)"
    for key in ("interaction.hr2d.1.weight", "interaction.hr1d.1.weight"):
        e = refusal(TracegraphError, pykeen_state_to_tracegraph, {**s, key: torch.ones(1)}, 3)
        assert str(e) == (
            f"not a PyKEEN ConvE state (missing {BIAS}, interaction.hr1d.0.weight); "
            "ConvE with apply_batch_normalization=False is not supported"
        )
    s = pk_state()
    s["interaction.hr2d.2.weight"] = torch.zeros(2, 2, 3, 3)
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, s, 3)
    assert str(e) == "PyKEEN ConvE with input_channels=2 is not supported (tracegraph uses 1)"
    s["interaction.hr2d.2.weight"] = torch.zeros(2, 1, 3, 2)
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, s, 3)
    assert str(e) == "PyKEEN ConvE kernel 3×2 is not square; tracegraph needs a k×k kernel"
    extra = {**pk_state(), **{f"x{i}": torch.ones(1) for i in range(6)}}
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, extra, 3)
    assert str(e) == "unexpected PyKEEN weights ['x0', 'x1', 'x2', 'x3', 'x4']: is this a plain ConvE?"
    e = refusal(TracegraphError, pykeen_state_to_tracegraph, {**pk_state(), "interaction.hr2d.4.x": torch.ones(1)}, 3)
    assert "['interaction.hr2d.4.x']" in str(e)


# --------------------------------------------------------------------------- import_pykeen


@pytest.mark.parametrize("inverse", [True, False])
def test_an_imported_pykeen_state_scores_like_pykeen(tmp_path, inverse):
    N, R = 5, 3
    s = pk_state(N=N, R=R, inverse=inverse, seed=1)
    f = tmp_path / "sd.pt"
    torch.save(s, f)
    ents, rels = write_maps(tmp_path, N, R)
    hp = tmp_path / "hp.json"
    hp.write_text(json.dumps({"pipeline": {"model_kwargs": {"embedding_height": 2, "embedding_width": 3}}}))
    summary = import_pykeen(f, tmp_path / "out", entity_to_id=ents, relation_to_id=rels, hyperparameters=hp)
    lm = load_model(tmp_path / "out")
    assert lm.model.config.reciprocal is inverse and lm.entities.labels == [f"e{i}" for i in range(N)]
    h = torch.arange(N)
    for pk_row in range(R * (2 if inverse else 1)):
        ours = R + pk_row // 2 if inverse and pk_row % 2 else (pk_row // 2 if inverse else pk_row)
        with torch.no_grad():
            got = lm.model.score_all(h, torch.full_like(h, ours)).double()
        want = pykeen_scores(s, 2, 3, h, torch.full_like(h, pk_row))
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert summary["source"] == {
        "format": "pykeen",
        "file": str(f.resolve()),
        "loaded_as": "PyKEEN state dict (weights_only)",
        "pykeen_inverse_relation_rows": "2r (r), 2r+1 (r⁻¹) -> r, R+r" if inverse else "none",
        "notes": [
            DROPS_NOTE,
            "learning rate unknown in the source: lr set to 1.0 (TracIn scores are then unscaled; "
            "re-import with --lr to weight them)",
            "label smoothing unknown in the source: 0.0 recorded (explain --label-smoothing overrides)",
        ],
    }
    assert json.loads((tmp_path / "out" / "config.json").read_text(encoding="utf-8")) == summary
    assert summary["lr"] == 1.0 and summary["train"] == {"label_smoothing": 0.0} and summary["imported"] is True
    assert lm.epoch == 1 and lm.lr == 1.0


def test_a_pykeen_import_records_lr_smoothing_epoch_and_flag_from_the_json(tmp_path):
    s = pk_state(R=3, inverse=True)
    f = tmp_path / "sd.pt"
    torch.save(s, f)
    ents, rels = write_maps(tmp_path, 5, 3)
    hp = tmp_path / "hp.json"
    hp.write_text(
        json.dumps(
            {
                "model_kwargs": {"embedding_height": 2, "embedding_width": 3, "input_dropout": 0.1},
                "optimizer_kwargs": {"learning_rate": 0.02},
                "training_kwargs": {"label_smoothing": 0.1, "num_epochs": 4},
                "dataset_kwargs": {"create_inverse_triples": True, "feature_map_dropout": 0.2, "output_dropout": 0.3},
            }
        )
    )
    summary = import_pykeen(f, tmp_path / "o", entity_to_id=ents, relation_to_id=rels, hyperparameters=hp)
    lm = load_model(tmp_path / "o")
    assert (lm.lr, lm.epoch) == (0.02, 4) and summary["lr"] == 0.02
    assert summary["train"] == {"label_smoothing": 0.1} and summary["source"]["notes"] == []
    assert summary["model"]["input_dropout"] == 0.1 and summary["model"]["output_dropout"] == 0.3
    summary = import_pykeen(
        f, tmp_path / "o2", entity_to_id=ents, relation_to_id=rels, hyperparameters=hp, lr=0.5, label_smoothing=0.0
    )
    assert summary["lr"] == 0.5 and summary["train"] == {"label_smoothing": 0.0}
    hp.write_text(json.dumps({"embedding_height": 2, "embedding_width": 3, "create_inverse_triples": False}))
    e = refusal(
        TracegraphError, import_pykeen, f, tmp_path / "o3", entity_to_id=ents, relation_to_id=rels, hyperparameters=hp
    )
    assert str(e) == "relation table has 6 rows, expected 3 (3 relations, inverse triples off)"


def test_a_pykeen_import_with_a_factory_folder_writes_its_training_triples(tmp_path):
    s = pk_state(N=5, R=3, inverse=True)
    f = tmp_path / "sd.pt"
    torch.save(s, f)
    d = factory_dir(tmp_path / "tf", N=5, R=3, inverse=True, triples="4\t2\t0\n0\t0\t1\n")
    summary = import_pykeen(f, tmp_path / "out", triples_factory_dir=d, lr=0.1, label_smoothing=0.2)
    out = tmp_path / "out"
    assert (out / "train.txt").read_text() == "E4\tP2\tE0\nE0\tP0\tE1\n"
    assert summary["train"] == {"label_smoothing": 0.2, "train": str((out / "train.txt").resolve())}
    assert (out / "node_dict.txt").read_text() == "".join(f"E{i}\t{i}\n" for i in range(5))
    assert (out / "rel_dict.txt").read_text() == "P0\t0\nP1\t1\nP2\t2\n"
    notes = ["image shape 2×3 per embedding inferred from the weight shapes", DROPS_NOTE]
    assert summary["source"]["notes"] == notes and summary["lr"] == 0.1
    # the factory's flag decides a table that fits either way, and a contradiction is refused
    torch.save({"create_inverse_triples": False}, d / "base.pth")
    e = refusal(TracegraphError, import_pykeen, f, tmp_path / "o2", triples_factory_dir=d)
    assert str(e) == "relation table has 6 rows, expected 3 (3 relations, inverse triples off)"
    hp = tmp_path / "hp.json"
    hp.write_text(json.dumps({"create_inverse_triples": True}))
    e = refusal(TracegraphError, import_pykeen, f, tmp_path / "o3", triples_factory_dir=d, hyperparameters=hp)
    assert str(e) == "the model and the triples factory disagree on create_inverse_triples"
    torch.save({"create_inverse_triples": True}, d / "base.pth")
    import_pykeen(f, tmp_path / "o4", triples_factory_dir=d, hyperparameters=hp)  # agreeing is fine
    # unreadable metadata: a note, and the table's size decides
    torch.save({"create_inverse_triples": True, "a": argparse.Namespace()}, d / "base.pth")
    summary = import_pykeen(f, tmp_path / "o5", triples_factory_dir=d)
    assert summary["source"]["notes"][0].startswith("base.pth did not load with weights_only")
    assert summary["model"]["reciprocal"] is True


def test_import_pykeen_refusals_word_for_word(tmp_path):
    ents, rels = write_maps(tmp_path, 4, 3)
    msg = "give --triples-factory-dir, or both --entity-to-id and --relation-to-id"
    for kw in ({}, {"entity_to_id": ents}, {"relation_to_id": rels}):
        assert str(refusal(TracegraphError, import_pykeen, tmp_path / "none.pt", tmp_path / "o", **kw)) == msg
    f = tmp_path / "sd.pt"
    torch.save({"w": torch.ones(1), "epochs": 3}, f)
    e = refusal(DataError, import_pykeen, f, tmp_path / "o", entity_to_id=ents, relation_to_id=rels)
    assert str(e) == f"{f}: neither a PyKEEN model nor a state dict of tensors"
    torch.save([torch.ones(1)], f)
    e = refusal(DataError, import_pykeen, f, tmp_path / "o", entity_to_id=ents, relation_to_id=rels)
    assert str(e) == f"{f}: neither a PyKEEN model nor a state dict of tensors"
    torch.save(pk_state(N=5), f)
    e = refusal(TracegraphError, import_pykeen, f, tmp_path / "o", entity_to_id=ents, relation_to_id=rels)
    assert str(e) == "the model has 5 entities, the entity map 4"
    assert not (tmp_path / "o").exists()
    bad = tmp_path / "bad_dict.txt"
    bad.write_text("")
    e = refusal(DataError, import_pykeen, f, tmp_path / "o", entity_to_id=bad, relation_to_id=rels)
    assert str(e) == f"{bad}: entity map is empty"
    e = refusal(DataError, import_pykeen, f, tmp_path / "o", entity_to_id=ents, relation_to_id=bad)
    assert str(e) == f"{bad}: relation map is empty"


# a stand-in for an unpickled PyKEEN ConvE: its class name, `interaction` with `shape_info`,
# `hr2d` / `hr1d` layer lists and `use_inverse_triples`, as PyKEEN 1.x has them


class _Rep(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self._embeddings = nn.Embedding(n, d)


class _Interaction(nn.Module):
    def __init__(self, d, C, k, H, W, drops=(0.1, 0.2, 0.3), eps=1e-5):
        super().__init__()
        self.shape_info = types.SimpleNamespace(image_height=H, image_width=W)
        flat = C * (2 * H - k + 1) * (W - k + 1)
        drops = drops or (None, None, None)
        d2 = [nn.Identity() if p is None else kind(p) for p, kind in zip(drops[:2], (nn.Dropout, nn.Dropout2d))]
        self.hr2d = nn.Sequential(
            nn.BatchNorm2d(1, eps=eps), d2[0], nn.Conv2d(1, C, k), nn.BatchNorm2d(C), nn.ReLU(), d2[1]
        )
        d1 = nn.Identity() if drops[2] is None else nn.Dropout(drops[2])
        self.hr1d = nn.Sequential(nn.Linear(flat, d), d1, nn.BatchNorm1d(d), nn.ReLU())


class ConvE(nn.Module):
    def __init__(self, N=5, R=3, d=6, C=2, k=3, H=3, W=2, inverse=True, **kw):
        super().__init__()
        self.entity_representations = nn.ModuleList([_Rep(N, d), _Rep(N, 1)])
        self.relation_representations = nn.ModuleList([_Rep(R * (1 if inverse is False else 2), d)])
        self.interaction = _Interaction(d, C, k, H, W, **kw)
        if inverse is not None:
            self.use_inverse_triples = inverse


class NotConvE(nn.Module):
    interaction = None


def test_an_unpickled_pykeen_module_gives_its_shape_dropouts_and_flag():
    m = ConvE(H=3, W=2, k=2)
    state, hp, inverse = _pykeen_module_info(m)
    assert hp == {
        "embedding_height": 3,
        "embedding_width": 2,
        "input_dropout": 0.1,
        "feature_map_dropout": 0.2,
        "output_dropout": 0.3,
    }
    assert inverse is True and state.keys() == m.state_dict().keys()
    _, hp, inverse = _pykeen_module_info(ConvE(H=3, W=2, k=2, drops=None, inverse=None))
    assert hp == {"embedding_height": 3, "embedding_width": 2} and inverse is None
    e = refusal(TracegraphError, _pykeen_module_info, NotConvE())
    assert str(e) == f"expected a PyKEEN ConvE model, got {__name__}.NotConvE"
    e = refusal(TracegraphError, _pykeen_module_info, nn.Module())
    assert str(e) == "expected a PyKEEN ConvE model, got torch.nn.modules.module.Module"
    e = refusal(TracegraphError, _pykeen_module_info, ConvE(H=3, W=2, k=2, eps=1e-3))
    assert str(e) == "BatchNorm eps 0.001 differs from tracegraph's 1e-5"


def test_a_module_missing_one_dropout_records_none_of_them():
    for drops in ((0.1, 0.2, None), (None, None, 0.3), (0.1, None, 0.3)):
        _, hp, _ = _pykeen_module_info(ConvE(H=3, W=2, k=2, drops=drops))
        assert hp == {"embedding_height": 3, "embedding_width": 2}, drops


def test_the_json_s_image_shape_is_used_as_given(tmp_path):
    f = tmp_path / "sd.pt"
    torch.save(pk_state(N=5, R=3, d=4, C=1, k=1, H=2, W=2), f)  # 1×4, 2×2 and 4×1 all fit these weights
    ents, rels = write_maps(tmp_path, 5, 3)
    hp = tmp_path / "hp.json"
    hp.write_text(json.dumps({"embedding_height": 2, "embedding_width": 2, "epochs": 5}))
    summary = import_pykeen(f, tmp_path / "o", entity_to_id=ents, relation_to_id=rels, hyperparameters=hp)
    assert (summary["model"]["embedding_height"], summary["model"]["embedding_width"]) == (2, 2)
    assert load_model(tmp_path / "o").epoch == 5
    torch.save(pk_state(N=5, R=3, d=6, k=3, H=2, W=3), f)
    hp.write_text(json.dumps({"embedding_height": 2, "embedding_width": 2}))  # 2×2 is not d = 6: refused, not mended
    e = refusal(
        TracegraphError, import_pykeen, f, tmp_path / "o2", entity_to_id=ents, relation_to_id=rels, hyperparameters=hp
    )
    assert str(e) == "embedding height×width (2×2) must equal --embedding-dim 6"


def test_a_module_s_flag_is_checked_against_the_factory_and_the_json_fills_a_missing_one(tmp_path):
    f = tmp_path / "trained_model.pkl"
    torch.save(ConvE(N=5, R=3, d=6, C=2, k=2, H=3, W=2, inverse=True), f)
    d = factory_dir(tmp_path / "tf", N=5, R=3, inverse=False)
    e = refusal(TracegraphError, import_pykeen, f, tmp_path / "o", triples_factory_dir=d, trust_pickle=True)
    assert str(e) == "the model and the triples factory disagree on create_inverse_triples"
    torch.save(ConvE(N=5, R=3, d=6, C=2, k=2, H=3, W=2, inverse=None), f)  # 2R rows, no flag
    ents, rels = write_maps(tmp_path, 5, 3)
    hp = tmp_path / "hp.json"
    hp.write_text(json.dumps({"create_inverse_triples": False}))
    e = refusal(TracegraphError, import_pykeen, f, tmp_path / "o", entity_to_id=ents, relation_to_id=rels,
                hyperparameters=hp, trust_pickle=True)  # fmt: skip
    assert str(e) == "relation table has 6 rows, expected 3 (3 relations, inverse triples off)"


def test_a_pickled_pykeen_module_imports_with_trust_and_its_own_settings_win(tmp_path):
    torch.manual_seed(0)
    m = ConvE(N=5, R=3, d=6, C=2, k=2, H=3, W=2, inverse=True).eval()
    f = tmp_path / "trained_model.pkl"
    torch.save(m, f)
    ents, rels = write_maps(tmp_path, 5, 3)
    e = refusal(DataError, import_pykeen, f, tmp_path / "o", entity_to_id=ents, relation_to_id=rels)
    assert str(e).endswith(HINT)
    hp = tmp_path / "hp.json"  # the module's shape, dropouts and flag override the JSON's; lr comes from it
    hp.write_text(
        json.dumps(
            {
                "embedding_height": 2,
                "embedding_width": 3,
                "input_dropout": 0.5,
                "lr": 0.01,
                "create_inverse_triples": False,
            }
        )
    )
    summary = import_pykeen(
        f, tmp_path / "o", entity_to_id=ents, relation_to_id=rels, hyperparameters=hp, trust_pickle=True
    )
    assert summary["source"]["loaded_as"] == "pickled PyKEEN model (loaded with --trust-pickle)"
    mc = summary["model"]
    assert (mc["embedding_height"], mc["embedding_width"], mc["reciprocal"]) == (3, 2, True)
    assert (mc["input_dropout"], mc["feature_map_dropout"], mc["output_dropout"]) == (0.1, 0.2, 0.3)
    assert summary["lr"] == 0.01 and summary["source"]["notes"][0].startswith("label smoothing unknown")
    s = {k: v.detach() for k, v in m.state_dict().items()}
    lm = load_model(tmp_path / "o")
    h = torch.arange(5)
    with torch.no_grad():
        torch.testing.assert_close(
            lm.model.score_all(h, torch.full_like(h, 4)).double(),
            pykeen_scores(s, 3, 2, h, torch.full_like(h, 3)),
            atol=1e-5,
            rtol=1e-5,
        )
    # a module without the flag: the JSON's
    torch.save(ConvE(N=5, R=3, d=6, C=2, k=2, H=3, W=2, inverse=None), f)
    hp.write_text(json.dumps({"create_inverse_triples": True}))
    summary = import_pykeen(
        f, tmp_path / "o2", entity_to_id=ents, relation_to_id=rels, hyperparameters=hp, trust_pickle=True
    )
    assert summary["model"]["reciprocal"] is True


# --------------------------------------------------------------------------- earlier format


def earlier_state(N=4, R=2, rows=None, d=6, H=2, W=3, C=2, k=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    flat = C * (H - k + 1) * (2 * W - k + 1)
    s = {
        "entity_embeddings.weight": torch.randn(N, d, generator=g),
        "relation_embeddings.weight": torch.randn(rows or R, d, generator=g),
        "conv1.weight": torch.randn(C, 1, k, k, generator=g),
        "conv1.bias": torch.randn(C, generator=g),
        "fc.weight": torch.randn(d, flat, generator=g),
        "fc.bias": torch.randn(d, generator=g),
        **bn_state("bn0.", 1, g),
        **bn_state("bn1.", C, g),
        **bn_state("bn2.", d, g),
    }
    cfg = {
        "num_entities": N,
        "num_relations": rows or R,
        "embedding_dim": d,
        "embedding_height": H,
        "embedding_width": W,
    }
    return s, cfg


def test_an_earlier_state_maps_key_by_key():
    s, cfg = earlier_state(rows=4, R=2)
    mcfg, out, notes = earlier_state_to_tracegraph(s, cfg, 2)
    assert mcfg == ConvEConfig(
        num_entities=4, num_relations=2, embedding_dim=6, embedding_height=2, embedding_width=3,
        output_channels=2, kernel_size=2, reciprocal=True, entity_bias=False, concat_axis="width",
    )  # fmt: skip
    assert notes == ["relation table has 2×2 rows: rows R..2R-1 taken as the inverses r⁻¹ = r + R"]
    rename = {"entity_embeddings.weight": "entity.weight", "relation_embeddings.weight": "relation.weight"}
    for k, v in s.items():
        new = rename.get(k) or ("conv." + k[6:] if k.startswith("conv1.") else k)
        assert out[new] is v
    assert len(out) == len(s)
    mcfg, _, notes = earlier_state_to_tracegraph(*earlier_state(R=2), 2)
    assert mcfg.reciprocal is False and notes == []


@pytest.mark.parametrize("key", ["b", "bias", "entity_bias"])
def test_an_earlier_entity_bias_is_kept_under_any_of_its_names(key):
    s, cfg = earlier_state(N=4)
    s[key] = torch.arange(4.0).reshape(4, 1)
    mcfg, out, _ = earlier_state_to_tracegraph(s, cfg, 2)
    assert mcfg.entity_bias is True and out["entity_bias"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert len(out) == len(s) and not {"b", "bias"} & set(out)


def test_earlier_dropouts_and_their_old_names():
    s, cfg = earlier_state()
    mcfg, _, _ = earlier_state_to_tracegraph(
        s, {**cfg, "hidden_drop": 0.4, "feat_drop": "0.25", "input_dropout": 0.1}, 2
    )
    assert (mcfg.input_dropout, mcfg.feature_map_dropout, mcfg.output_dropout) == (0.1, 0.25, 0.4)
    both = {**cfg, "hidden_drop": 0.4, "output_dropout": 0.05, "feat_drop": 0.6, "feature_map_dropout": 0.15}
    mcfg, _, _ = earlier_state_to_tracegraph(s, both, 2)
    assert (mcfg.feature_map_dropout, mcfg.output_dropout) == (0.15, 0.05)  # the new names win
    mcfg, _, _ = earlier_state_to_tracegraph(s, cfg, 2)
    assert (mcfg.input_dropout, mcfg.feature_map_dropout, mcfg.output_dropout) == (0.2, 0.2, 0.3)


def test_a_bad_earlier_state_is_refused_word_for_word():
    s, cfg = earlier_state(N=4, R=2)
    part = {k: v for k, v in s.items() if k not in ("conv1.weight", "fc.weight")}
    e = refusal(TracegraphError, earlier_state_to_tracegraph, part, cfg, 2)
    assert str(e) == "not an earlier-format ConvE state (missing conv1.weight, fc.weight)"
    need = "(needs num_entities, num_relations, embedding_dim, embedding_height, embedding_width)"
    for key in ("num_entities", "embedding_dim", "embedding_height", "embedding_width"):
        e = refusal(TracegraphError, earlier_state_to_tracegraph, s, {k: v for k, v in cfg.items() if k != key}, 2)
        assert str(e) == f"model_config lacks '{key}' {need}"
    e = refusal(TracegraphError, earlier_state_to_tracegraph, s, {**cfg, "embedding_height": "x"}, 2)
    assert str(e) == f"model_config lacks invalid literal for int() with base 10: 'x' {need}"
    e = refusal(TracegraphError, earlier_state_to_tracegraph, s, {**cfg, "embedding_dim": None}, 2)
    assert str(e).startswith("model_config lacks int() argument must be")
    e = refusal(TracegraphError, earlier_state_to_tracegraph, s, {**cfg, "num_entities": 5}, 2)
    assert str(e) == "entity table (4, 6) does not match model_config (5, 6)"
    e = refusal(TracegraphError, earlier_state_to_tracegraph, s, {**cfg, "embedding_dim": 5}, 2)
    assert str(e) == "entity table (4, 6) does not match model_config (4, 5)"
    e = refusal(TracegraphError, earlier_state_to_tracegraph, s, cfg, 3)
    assert str(e) == "relation table has 2 rows; the relation map has 3 relations (expected R or 2R rows)"
    for shape in ((2, 2, 2, 2), (2, 1, 2, 3)):
        e = refusal(TracegraphError, earlier_state_to_tracegraph, {**s, "conv1.weight": torch.zeros(shape)}, cfg, 2)
        assert str(e) == f"conv1 {shape}: need 1 input channel and a square kernel"
    for key in ("foo", "entity_embeddings.weight2", "conv1", "fcx.weight"):
        e = refusal(TracegraphError, earlier_state_to_tracegraph, {**s, key: torch.ones(1)}, cfg, 2)
        assert str(e) == f"unexpected weight {key!r} in the earlier-format state dict"
    e = refusal(TracegraphError, earlier_state_to_tracegraph, {**s, "fc.weight": torch.zeros(6, 99)}, cfg, 2)
    # width-concatenated 2×6 image, 2×2 kernel, 2 channels: 2·(2−2+1)·(6−2+1) = 10 inputs
    assert str(e) == "fc expects 99 inputs; a width-concatenated 2×6 image gives 10: check embedding_height/width"


@pytest.mark.parametrize("reciprocal", [False, True])
def test_an_imported_earlier_checkpoint_scores_like_the_reference(tmp_path, reciprocal):
    ref, f = earlier_checkpoint(tmp_path, 12, 3, rows=6 if reciprocal else None)
    summary = import_checkpoint(f, tmp_path / "out", tmp_path / "node_dict.txt", tmp_path / "rel_dict.txt")
    lm = load_model(tmp_path / "out")
    assert (lm.lr, lm.epoch) == (0.003, 7) and summary["lr"] == 0.003
    h = torch.arange(12)
    with torch.no_grad():
        for r in range(6 if reciprocal else 3):
            rr = torch.full_like(h, r)
            torch.testing.assert_close(lm.model.score_all(h, rr), ref(h, rr), atol=1e-5, rtol=0)
    assert summary["source"] == {
        "format": "earlier checkpoint",
        "file": str(f.resolve()),
        "layout": "head and relation concatenated along the width (H×2W image), no entity bias",
        "notes": (["relation table has 2×3 rows: rows R..2R-1 taken as the inverses r⁻¹ = r + R"] if reciprocal else [])
        + ["label smoothing unknown in the source: 0.0 recorded (explain --label-smoothing overrides)"],
    }
    assert summary["train"] == {"label_smoothing": 0.0} and not (tmp_path / "out" / "train.txt").exists()


def test_an_earlier_checkpoint_records_what_it_knows(tmp_path):
    ents, rels = write_maps(tmp_path, 4, 2)
    s, cfg = earlier_state(N=4, R=2)
    s["b"] = torch.zeros(4)
    f = tmp_path / "c.pt"
    torch.save(
        {
            "model_state_dict": s,
            "model_config": {**cfg, "label_smoothing": 0.1},
            "epoch": 3,
            "hp": {"learning_rate": 0.2},
        },
        f,
    )
    summary = import_checkpoint(f, tmp_path / "o", ents, rels)
    assert (
        summary["lr"] == 0.2 and summary["train"] == {"label_smoothing": 0.1} and load_model(tmp_path / "o").epoch == 3
    )
    assert summary["source"]["layout"].endswith("(H×2W image), entity bias") and summary["source"]["notes"] == []
    summary = import_checkpoint(f, tmp_path / "o2", ents, rels, lr=0.7, label_smoothing=0.0)
    assert summary["lr"] == 0.7 and summary["train"] == {"label_smoothing": 0.0}
    torch.save({"model_state_dict": s, "model_config": cfg, "epoch": "3"}, f)  # an epoch that is not an int: 1
    summary = import_checkpoint(f, tmp_path / "o3", ents, rels)
    assert load_model(tmp_path / "o3").epoch == 1 and summary["lr"] == 1.0
    assert summary["source"]["notes"][0].startswith("learning rate unknown in the source")


def test_an_earlier_bias_listed_first_keeps_every_other_weight():
    s, cfg = earlier_state(N=4)
    s = {"b": torch.arange(4.0), **s}
    mcfg, out, _ = earlier_state_to_tracegraph(s, cfg, 2)
    assert mcfg.entity_bias is True and len(out) == len(s) and "fc.weight" in out and "bn2.running_var" in out


def test_a_pickled_earlier_checkpoint_needs_trust(tmp_path):
    ents, rels = write_maps(tmp_path, 4, 2)
    s, cfg = earlier_state(N=4, R=2)
    f = tmp_path / "c.pt"
    torch.save({"model_state_dict": s, "model_config": cfg, "args": argparse.Namespace(lr=0.25)}, f)
    e = refusal(DataError, import_checkpoint, f, tmp_path / "o", ents, rels)
    assert str(e).startswith(f"{f}: cannot load safely (weights_only): ") and str(e).endswith(HINT)
    summary = import_checkpoint(f, tmp_path / "o", ents, rels, trust_pickle=True)
    assert summary["model"]["num_entities"] == 4 and summary["lr"] == 1.0  # a Namespace is no container


def test_an_earlier_checkpoint_names_each_bad_map(tmp_path):
    ents, rels = write_maps(tmp_path, 4, 2)
    s, cfg = earlier_state(N=4, R=2)
    f = tmp_path / "c.pt"
    torch.save({"model_state_dict": s, "model_config": cfg}, f)
    bad = tmp_path / "empty.txt"
    bad.write_text("\n")
    assert str(refusal(DataError, import_checkpoint, f, tmp_path / "o", bad, rels)) == f"{bad}: entity map is empty"
    assert str(refusal(DataError, import_checkpoint, f, tmp_path / "o", ents, bad)) == f"{bad}: relation map is empty"


def test_an_earlier_checkpoint_refusals_word_for_word(tmp_path):
    ents, rels = write_maps(tmp_path, 4, 2)
    s, cfg = earlier_state(N=4, R=2)
    f = tmp_path / "c.pt"
    for payload in ({"model_state_dict": s}, {"model_config": cfg}, [s, cfg]):
        torch.save(payload, f)
        e = refusal(DataError, import_checkpoint, f, tmp_path / "o", ents, rels)
        assert str(e) == f"{f}: not an earlier-format checkpoint (needs 'model_state_dict' and 'model_config')"
    torch.save({"model_state_dict": s, "model_config": {**cfg, "num_relations": 3}}, f)
    e = refusal(TracegraphError, import_checkpoint, f, tmp_path / "o", ents, rels)
    assert str(e) == "model_config num_relations=3 but the relation map has 2"
    s4, cfg4 = earlier_state(N=4, R=2, rows=4)
    torch.save({"model_state_dict": s4, "model_config": {**cfg4, "num_relations": 4}}, f)
    assert import_checkpoint(f, tmp_path / "o1", ents, rels)["model"]["reciprocal"] is True  # 2R rows named
    torch.save({"model_state_dict": s4, "model_config": {k: v for k, v in cfg4.items() if k != "num_relations"}}, f)
    assert import_checkpoint(f, tmp_path / "o2", ents, rels)["model"]["num_relations"] == 2
    ents5, _ = write_maps(tmp_path / "o2", 5, 2)
    torch.save({"model_state_dict": s, "model_config": cfg}, f)
    e = refusal(TracegraphError, import_checkpoint, f, tmp_path / "o", ents5, rels)
    assert str(e) == "the model has 4 entities, the entity map 5"
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- writing


def test_write_model_dir_writes_both_checkpoints_and_fills_missing_batch_counts(tmp_path):
    s, cfg = earlier_state(N=4, R=2)
    mcfg, state, _ = earlier_state_to_tracegraph(s, cfg, 2)
    state = {
        k: (v.double() if v.is_floating_point() else v)
        for k, v in state.items()
        if not k.endswith("num_batches_tracked")
    }
    ents, rels = IdMap(["a", "b", "c", "d"]), IdMap(["p", "q"])
    summary = write_model_dir(tmp_path / "o", mcfg, state, ents, rels, {"format": "x"}, ["n1"], lr=0.5, label_smoothing=0.1, epoch=9,
                              train_ids=np.array([[3, 1, 0]]))  # fmt: skip
    out = tmp_path / "o"
    final = torch.load(out / "final_model.pt", weights_only=True)
    best = torch.load(out / "best_model.pt", weights_only=True)
    assert final["epoch"] == best["epoch"] == 9 and final["lr"] == 0.5
    for k, v in final["model"].items():
        assert torch.equal(v, best["model"][k])
        if k.endswith("num_batches_tracked"):
            assert v.item() == 0
        else:
            assert v.dtype == torch.float32 and torch.equal(v, state[k].float())
    assert (out / "train.txt").read_text() == "d\tq\ta\n"
    assert summary == {
        "model": mcfg.to_dict(),
        "train": {"label_smoothing": 0.1, "train": str((out / "train.txt").resolve())},
        "source": {"format": "x", "notes": ["n1"]},
        "imported": True,
        "lr": 0.5,
        "versions": summary["versions"],
    }
    assert summary["versions"]["torch"] == torch.__version__ and set(summary["versions"]) == {"tracegraph", "torch"}
    summary = write_model_dir(tmp_path / "p" / "q", mcfg, state, ents, rels, {}, [], train_ids=np.zeros((0, 3), int))
    assert not (tmp_path / "p" / "q" / "train.txt").exists() and summary["train"] == {"label_smoothing": 0.0}
    assert torch.load(tmp_path / "p" / "q" / "final_model.pt", weights_only=True)["epoch"] == 1


def test_write_model_dir_keeps_given_batch_counts_and_writes_into_an_existing_folder(tmp_path):
    s, cfg = earlier_state(N=4, R=2)  # every BatchNorm's num_batches_tracked is 3
    mcfg, state, _ = earlier_state_to_tracegraph(s, cfg, 2)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "config.json").write_text("{}")
    write_model_dir(tmp_path / "o", mcfg, state, IdMap(list("abcd")), IdMap(["p", "q"]), {}, [], lr=0.1)
    final = torch.load(tmp_path / "o" / "final_model.pt", weights_only=True)
    assert [final["model"][f"bn{i}.num_batches_tracked"].item() for i in range(3)] == [3, 3, 3]
    assert final["metrics"] == {"imported": True}
    assert json.loads((tmp_path / "o" / "config.json").read_text())["lr"] == 0.1


def test_a_mapped_state_missing_a_weight_is_refused(tmp_path):
    s, cfg = earlier_state(N=4, R=2)
    mcfg, state, _ = earlier_state_to_tracegraph(s, cfg, 2)
    del state["conv.bias"]
    e = refusal(
        TracegraphError, write_model_dir, tmp_path / "o", mcfg, state, IdMap(list("abcd")), IdMap(["p", "q"]), {}, []
    )
    assert str(e).startswith("the mapped weights do not fit the ConvE config: ") and "conv.bias" in str(e)


def test_weights_that_do_not_fit_are_refused_before_anything_is_written(tmp_path):
    s, cfg = earlier_state(N=4, R=2)
    mcfg, state, _ = earlier_state_to_tracegraph(s, cfg, 2)
    state["entity.weight"] = torch.zeros(5, 6)
    e = refusal(
        TracegraphError, write_model_dir, tmp_path / "o", mcfg, state, IdMap(list("abcd")), IdMap(["p", "q"]), {}, []
    )
    assert str(e).startswith("the mapped weights do not fit the ConvE config: ") and "entity.weight" in str(e)
    assert not (tmp_path / "o").exists()


def test_the_reference_forward_is_the_earlier_model_when_stacked_by_width(tmp_path):
    """The float64 PyKEEN reference above, checked once against an independent module (EarlierConvE
    stacks by width; with H = 1 the height- and width-stacked images hold the same numbers in a
    different shape, so this only checks the layer order and the bias-free score)."""
    ref = EarlierConvE(3, 2, 4, 1, 4, output_channels=2, kernel_size=1).eval()
    sd = ref.state_dict()
    s = {
        ENT: sd["entity_embeddings.weight"], BIAS: torch.zeros(3, 1), REL: sd["relation_embeddings.weight"],
        **{"interaction.hr2d.0." + k[4:]: v for k, v in sd.items() if k.startswith("bn0.")},
        "interaction.hr2d.2.weight": sd["conv1.weight"], "interaction.hr2d.2.bias": sd["conv1.bias"],
        **{"interaction.hr2d.3." + k[4:]: v for k, v in sd.items() if k.startswith("bn1.")},
        "interaction.hr1d.0.weight": sd["fc.weight"], "interaction.hr1d.0.bias": sd["fc.bias"],
        **{"interaction.hr1d.2." + k[4:]: v for k, v in sd.items() if k.startswith("bn2.")},
    }  # fmt: skip
    h = torch.arange(3)
    with torch.no_grad():
        want = ref(h, torch.ones_like(h)).double()
    # with a 1×1 kernel the conv acts per pixel, so a 2×4 image and a 1×8 image flatten alike
    torch.testing.assert_close(pykeen_scores(s, 1, 4, h, torch.ones_like(h)), want, atol=1e-5, rtol=1e-5)
