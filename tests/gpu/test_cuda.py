"""CUDA-only claims (marked `gpu`: skipped without a GPU, run on the GPU machine).

Each compares the CUDA path with an independent one: the CUDA-graph step with eager steps, exact
TracIn on CUDA (with TF32 switched *on* globally, to prove the engine turns it off) with the
per-example autograd reference, a --deterministic resume with an uninterrupted run.
"""

import numpy as np
import pytest
import torch

from tests.kg.references import TINY, assert_rel_close
from tracegraph.kg.model.model_io import list_epoch_checkpoints, load_model
from tracegraph.kg.explain.tracin.engine import InfluenceOptions, compute_influence
from tracegraph.kg.model.train import TrainConfig, train
from tracegraph.kg.data.triples import encode_triples, read_labeled_triples
from tracegraph.runtime.checkpoints import load_checkpoint
from tracegraph.runtime.memory import cleanup, peak_memory_bytes, reset_peak
from tracegraph.runtime.seeding import rng_state, seed_everything, seed_torch, set_rng_state

pytestmark = pytest.mark.gpu
CUDA = "cuda"


def cfg(umls_dir, out, **kw):
    base = dict(
        train=str(umls_dir / "train.txt"),
        valid=str(umls_dir / "valid.txt"),
        output_dir=str(out),
        epochs=3,
        batch_size=128,
        checkpoint_every=1,
        device=CUDA,
        tf32=False,
        model=dict(TINY),
    )
    base["model"].update(kw.pop("model", {}))
    base.update(kw)
    return TrainConfig(**base)


def history(out):
    import json

    return json.loads((out / "training_history.json").read_text())


@pytest.mark.parametrize("mode,loss_impl", [("kvsall", "standard"), ("kvsall", "fused"), ("1vsall", "standard")])
def test_graph_replay_trains_like_eager_steps(umls_dir, tmp_path, mode, loss_impl):
    # no dropout, so eager and replayed steps see identical arithmetic; only float summation order may differ
    nodrop = dict(input_dropout=0.0, feature_map_dropout=0.0, output_dropout=0.0)
    kw = dict(training_mode=mode, loss_impl=loss_impl, model=nodrop, lr_decay=0.7)  # lr changes: re-capture
    train(cfg(umls_dir, tmp_path / "g", cuda_graphs=True, **kw))
    train(cfg(umls_dir, tmp_path / "e", cuda_graphs=False, **kw))
    g, e = history(tmp_path / "g"), history(tmp_path / "e")
    np.testing.assert_allclose([x["loss"] for x in g], [x["loss"] for x in e], rtol=2e-4)
    np.testing.assert_allclose([x["valid"]["mrr"] for x in g], [x["valid"]["mrr"] for x in e], atol=0.02)
    assert [x["lr"] for x in g] == pytest.approx([0.003, 0.0021, 0.00147])


def test_deterministic_resume_is_bit_exact_on_cuda(umls_dir, tmp_path):
    train(cfg(umls_dir, tmp_path / "full", deterministic=True))
    train(cfg(umls_dir, tmp_path / "part", deterministic=True, epochs=1))
    train(cfg(umls_dir, tmp_path / "part", deterministic=True, resume=True))
    a = load_checkpoint(tmp_path / "full" / "final_model.pt")["model"]
    b = load_checkpoint(tmp_path / "part" / "final_model.pt")["model"]
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_fp16_with_grad_scaler_trains(umls_dir, tmp_path):
    # GradScaler starts at 2^16 and skips the first overflowing steps: a short run learns, but later
    s = train(cfg(umls_dir, tmp_path / "h", precision="fp16", epochs=3))
    h = history(tmp_path / "h")
    assert all(np.isfinite(x["loss"]) for x in h) and h[-1]["loss"] < h[0]["loss"]
    assert h[-1]["valid"]["mrr"] > h[0]["valid"]["mrr"]
    assert 0 <= h[-1]["skipped_steps_total"] == s["skipped_steps"] < 20 * 3


def test_bf16_training_learns(umls_dir, tmp_path):
    # bf16 keeps 8 mantissa bits: the tiny d=12 model learns more slowly than in fp32, but it learns
    train(cfg(umls_dir, tmp_path / "b", precision="bf16", epochs=3))
    h = history(tmp_path / "b")
    assert h[-1]["loss"] < h[0]["loss"] and h[-1]["valid"]["mrr"] > h[0]["valid"]["mrr"]


@pytest.mark.parametrize("loss", ["train-loss", "score", "logit"])
def test_exact_tracin_on_cuda_equals_autograd_with_tf32_on(umls_dir, tmp_path, loss):
    out = tmp_path / "run"
    train(cfg(umls_dir, out, valid=None, lr_decay=0.5))
    lm = load_model(out)
    ids = encode_triples(read_labeled_triples(umls_dir / "train.txt"), lm.entities, lm.relations)
    train_ids = ids[np.random.default_rng(0).choice(len(ids), 300, replace=False)]
    test_ids = encode_triples(read_labeled_triples(umls_dir / "test.txt"), lm.entities, lm.relations)[:5]
    ckpts = list_epoch_checkpoints(out)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # the engine must switch it off itself
    try:
        ex = compute_influence(ckpts, train_ids, test_ids, InfluenceOptions(loss=loss), torch.device(CUDA))
        assert torch.backends.cuda.matmul.allow_tf32  # ... and restore it
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    ref = compute_influence(
        ckpts, train_ids, test_ids, InfluenceOptions(loss=loss, engine="autograd", batch_size=64), torch.device("cpu")
    )
    assert_rel_close(ex.scores, ref.scores)
    assert_rel_close(ex.train_self, ref.train_self)


def test_captured_state_restores_the_cuda_generator():
    seed_everything(4)
    torch.rand(3, device=CUDA)
    state = rng_state()
    want = torch.rand(5, device=CUDA).cpu()
    seed_everything(5)
    torch.rand(3, device=CUDA)
    set_rng_state(state)
    assert torch.equal(torch.rand(5, device=CUDA).cpu(), want)


def test_seed_torch_gives_the_cuda_stream_of_torch_manual_seed():
    torch.rand(1, device=CUDA)  # CUDA in use, as in training by the time it reseeds
    torch.manual_seed(8)
    want = torch.rand(5, device=CUDA).cpu()
    seed_torch(8)
    assert torch.equal(torch.rand(5, device=CUDA).cpu(), want)


def test_cuda_peak_counts_tensors_resets_and_cleanup_returns_the_cache():
    cuda = torch.device(CUDA)
    size = 64 * 1024**2
    # tensors of earlier tests in this process may still be alive: measure above what is allocated now
    base = torch.cuda.memory_allocated(cuda)
    reset_peak(cuda)
    block = torch.empty(size, dtype=torch.uint8, device=cuda)
    assert peak_memory_bytes(cuda) >= base + size
    del block
    reserved = torch.cuda.memory_reserved(cuda)
    cleanup(cuda)
    assert torch.cuda.memory_reserved(cuda) <= reserved - size  # the freed block left the cache
    reset_peak(cuda)
    assert peak_memory_bytes(cuda) < base + size
