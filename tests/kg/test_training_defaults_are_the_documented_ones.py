"""The training defaults are the ConvE paper's, as docs/training.md states them, in the library
(``TrainConfig``, ``ConvEConfig``) and in ``tracegraph train`` alike.

Reference: the numbers written out below from the documentation (Dettmers et al. 2018: d = 200 as
10×20, 32 3×3 filters, dropout 0.2 / 0.2 / 0.3, Adam at 0.003, label smoothing 0.1, batch 128,
KvsAll, reciprocal relations; 100 epochs; the other settings as each option's help states them).
"""

import dataclasses

import typer

from tracegraph.cli import app
from tracegraph.kg.model.conve import ConvEConfig
from tracegraph.kg.model.train_config import TrainConfig

DOCUMENTED = {
    "epochs": 100,
    "batch_size": 128,
    "learning_rate": 0.003,
    "label_smoothing": 0.1,
    "training_mode": "kvsall",
    "loss": "bce",
    "loss_impl": "auto",
    "optimizer": "adam",
    "weight_decay": 0.0,
    "lr_decay": 1.0,
    "lr_scheduler": "none",
    "lr_factor": 0.5,
    "lr_patience": 5,
    "lr_step_size": 50,
    "lr_min": 0.0,
    "lr_threshold": 1e-4,
    "seed": 0,
    "device": "auto",
    "precision": "fp32",
    "use_mixed_precision": False,
    "gradient_checkpointing": False,
    "memory_cleanup": False,
    "compile": False,
    "cuda_graphs": True,
    "tf32": True,
    "deterministic": False,
    "num_workers": 0,
    "checkpoint_every": 10,
    "eval_every": 1,
    "patience": None,
    "min_epochs": 0,
    "unseen": "include",
    "resume": False,
    "overwrite": False,
    "preset": None,
}
MODEL = {
    "embedding_dim": 200,
    "embedding_height": 10,
    "embedding_width": 20,
    "output_channels": 32,
    "kernel_size": 3,
    "input_dropout": 0.2,
    "feature_map_dropout": 0.2,
    "output_dropout": 0.3,
    "entity_dropout": 0.0,
    "relation_dropout": 0.0,
    "reciprocal": True,
}


def test_train_config_defaults_are_the_documented_ones():
    cfg = TrainConfig(train="t.txt", output_dir="out")
    assert {k: getattr(cfg, k) for k in DOCUMENTED} == DOCUMENTED
    assert cfg.model == {} and cfg.filter_triples == [] and cfg.valid is None and cfg.test is None
    assert cfg.exclude is None and cfg.entity_map is None and cfg.relation_map is None
    assert cfg.eval_batch_size == 0  # auto
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(DOCUMENTED) <= fields


def test_model_defaults_are_the_conve_papers():
    c = ConvEConfig(num_entities=5, num_relations=2)
    assert {k: getattr(c, k) for k in MODEL} == MODEL
    assert c.entity_bias is True and c.concat_axis == "height"


def test_the_train_command_has_the_same_defaults():
    params = {p.name: p.default for p in typer.main.get_command(app).commands["train"].params}
    assert {k: params[k] for k in DOCUMENTED} == DOCUMENTED
    assert {k: params[k] for k in MODEL} == MODEL
