"""GT-SSL's encoder defaults are the original research scripts' stated ones (run_gtssl_pretrain.sh:
HIDDEN_CHANNELS=64, NUM_INTERACTIONS=3, NUM_RBF_CENTERS=20), in the library and on the command
line, for pretraining and fine-tuning alike; the loss weights are the documented 0.2 / 1.0."""

import pytest

from tests.conftest import run_cli
from tracegraph.trees.sgmp import EncoderConfig

SEED = {"hidden_channels": 64, "num_interactions": 3, "num_rbf": 20}


def test_library_encoder_defaults_are_the_seeds():
    cfg = EncoderConfig()
    assert {k: getattr(cfg, k) for k in SEED} == SEED
    assert cfg.readout == "mean" and cfg.second_node_messages is True


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_cli_encoder_defaults_are_the_seeds(monkeypatch, tmp_path, command):
    import tracegraph.trees.train as tt

    seen = {}

    def capture(cfg, out, *a, **kw):
        seen["cfg"] = cfg
        raise SystemExit(0)

    monkeypatch.setattr(tt, command, capture)
    run_cli(["trees", command, "-o", tmp_path / "o"])
    cfg = seen["cfg"]
    assert {k: cfg.encoder[k] for k in SEED} == SEED
    assert cfg.encoder["readout"] == "mean" and cfg.encoder["cutoff"] is None  # cutoff: from the data
    if command == "pretrain":
        assert (cfg.order_weight, cfg.growth_weight) == (0.2, 1.0)
