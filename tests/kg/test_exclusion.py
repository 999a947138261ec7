"""Excluding training triples keeps every other batch, and its dropout masks, as they were."""

import hashlib

import pytest
import torch

from tracegraph.kg.model.objective import TrainingObjective
from tracegraph.errors import DataError
from tracegraph.kg.data.split import write_triples
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.kg.data.idmap import IdMap
from tracegraph.kg.data.triples import read_labeled_triples

TINY = dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=4)


def _cfg(umls_dir, out, **kw):
    base = dict(
        train=str(umls_dir / "train.txt"),
        output_dir=str(out),
        epochs=2,
        batch_size=256,
        checkpoint_every=100,
        model=dict(TINY),
    )
    base.update(kw)
    return TrainConfig(**base)


def _record_batches(monkeypatch, cfg):
    """Train, recording per step: the batch's (h, r, tail) triples as a set, and the RNG state."""
    seen = []
    real = TrainingObjective.forward

    def spy(self, h, r, batch_index, tails, weight=None):  # weight: CUDA-graph padding only, None on CPU
        rows = {(int(h[b]), int(r[b]), int(t)) for b, t in zip(batch_index.tolist(), tails.tolist())}
        pairs = {(int(a), int(b)) for a, b in zip(h.tolist(), r.tolist())}
        rng = hashlib.sha1(torch.get_rng_state().numpy().tobytes()).hexdigest()  # what dropout will draw from
        loss = real(self, h, r, batch_index, tails, weight)
        seen.append((rows, pairs, rng, float(loss.detach())))
        return loss

    monkeypatch.setattr(TrainingObjective, "forward", spy)
    train(cfg)
    monkeypatch.undo()
    return seen


@pytest.mark.parametrize("mode", ["kvsall", "1vsall"])
def test_exclusion_changes_only_the_batches_holding_the_triples(umls_dir, tmp_path, monkeypatch, mode):
    lt = read_labeled_triples(umls_dir / "train.txt")
    full = _record_batches(monkeypatch, _cfg(umls_dir, tmp_path / "full", training_mode=mode))
    # one triple whose (head, relation) has no other tail (the pair leaves its batch) and one that shares it
    heads_rel = list(zip(lt.heads, lt.relations))
    alone = next(i for i, p in enumerate(heads_rel) if heads_rel.count(p) == 1)
    shared = next(i for i, p in enumerate(heads_rel) if heads_rel.count(p) > 2)
    chosen = [(lt.heads[i], lt.relations[i], lt.tails[i]) for i in (alone, shared)]
    write_triples(tmp_path / "exclude.txt", chosen)
    cut = _record_batches(
        monkeypatch, _cfg(umls_dir, tmp_path / "cut", training_mode=mode, exclude=str(tmp_path / "exclude.txt"))
    )
    ents, rels = IdMap.read(tmp_path / "full" / "node_dict.txt"), IdMap.read(tmp_path / "full" / "rel_dict.txt")
    gone = {(ents.id(h), rels.id(r), ents.id(t)) for h, r, t in chosen}
    assert len(cut) == len(full)
    # reciprocal model (the default): both directions of an excluded triple go
    gone |= {(t, r + len(rels), h) for h, r, t in gone}
    touched = 0
    for (rows_f, pairs_f, rng_f, loss_f), (rows_c, pairs_c, rng_c, loss_c) in zip(full, cut):
        if not touched:  # up to the first changed batch the two runs are the same run, bit for bit
            assert loss_f == loss_c or rows_c != rows_f
        assert rng_f == rng_c  # the same dropout masks in every step, before and after the change
        assert rows_c == rows_f - gone  # the batch minus the excluded triples, nothing else
        touched += rows_c != rows_f
        if mode == "kvsall":  # a pair leaves its batch only when none of its tails is left
            assert pairs_c == {p for p in pairs_f if any(x[:2] == p for x in rows_c)}
    assert 2 <= touched <= 2 * 2 * 2  # two triples, both directions, two epochs; a batch may hold several
    # the excluded sample really leaves: the pair of the lone triple is in no batch
    lone = (ents.id(chosen[0][0]), rels.id(chosen[0][1]))
    assert all(lone not in p for _, p, _, _ in cut) and any(lone in p for _, p, _, _ in full)


def test_rerun_is_bit_for_bit_and_unknown_exclusions_are_refused(umls_dir, tmp_path):
    """The necessity test compares retrains with the original run: a rerun must be that run, and
    excluding a triple that is not in the training file is refused (it would exclude nothing)."""
    lt = read_labeled_triples(umls_dir / "train.txt")
    train(_cfg(umls_dir, tmp_path / "a", epochs=1))
    train(_cfg(umls_dir, tmp_path / "b", epochs=1))
    a = torch.load(tmp_path / "a" / "final_model.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "final_model.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    write_triples(tmp_path / "bad.txt", [(lt.heads[0], lt.relations[0], lt.heads[0])])
    with pytest.raises(DataError, match="not a training triple"):
        train(_cfg(umls_dir, tmp_path / "c", epochs=1, exclude=str(tmp_path / "bad.txt")))
