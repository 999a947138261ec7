"""The settings of one training run: ``tracegraph train``'s options, saved in ``config.json``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TrainConfig:
    """The settings of one training run.

    Each field is the ``tracegraph train`` option of the same name (underscores become dashes);
    ``model`` holds :class:`~tracegraph.kg.model.conve.ConvEConfig` overrides. The comments on the
    fields give units and accepted values.
    """

    train: str
    output_dir: str
    valid: str | None = None
    test: str | None = None
    entity_map: str | None = None  # node_dict.txt; built from the training file when absent
    relation_map: str | None = None
    epochs: int = 100
    batch_size: int = 128
    learning_rate: float = 0.003
    lr_decay: float = 1.0  # multiplicative per epoch (1.0 = constant); the 'none' schedule only
    lr_scheduler: str = "none"  # none | step | cosine | plateau (tracegraph/kg/model/schedules.py)
    lr_factor: float = 0.5  # step and plateau: multiply the rate by this
    lr_patience: int = 5  # plateau: evaluations without improvement before lowering the rate
    lr_step_size: int = 50  # step: epochs between reductions
    lr_min: float = 0.0  # cosine: final rate; plateau: lowest rate
    lr_threshold: float = 1e-4  # plateau: relative MRR gain that counts as improvement
    optimizer: str = "adam"  # adam | adagrad
    weight_decay: float = 0.0  # L2 on all parameters, in the optimizer
    loss: str = "bce"  # bce (ConvE paper) | ce (softmax cross-entropy, LibKGE's "kl")
    label_smoothing: float = 0.1
    training_mode: str = "kvsall"  # kvsall | 1vsall
    loss_impl: str = "auto"  # auto | standard | fused
    seed: int = 0
    device: str = "auto"
    precision: str = "fp32"
    use_mixed_precision: bool = False
    gradient_checkpointing: bool = False
    memory_cleanup: bool = False
    compile: bool = False
    num_workers: int = 0
    checkpoint_every: int = 10  # epoch checkpoints (weights, lr) for TracIn; resume.pt is rewritten every epoch
    eval_every: int = 1
    patience: int | None = None  # evaluations without valid-MRR gain before stopping; 0 = never; None: 10 with valid
    min_epochs: int = 0  # no early stopping before this epoch
    eval_batch_size: int = 0  # queries ranked at once; 0 = auto (256 on CPU; on a GPU up to 4096, ~256 MiB of scores)
    tf32: bool = True  # CUDA: TF32 matmuls while training (exactness claims turn it off themselves)
    deterministic: bool = False  # CUDA: deterministic kernels, bit-exact reruns (slower)
    cuda_graphs: bool = True  # CUDA: replay each full-size batch's step as one captured graph
    resume: bool = False
    # training triples (a triples file) left out while every batch keeps its place: see kg/data/exclusion.py
    exclude: str | None = None
    overwrite: bool = False  # clear a used run directory first (runtime/rundir.py)
    unseen: str = "include"  # valid/test entities never seen in train: include | drop | error (kg/data/unseen.py)
    model: dict = field(default_factory=dict)  # ConvEConfig overrides (sizes, dropouts, reciprocal…)
    filter_triples: list = field(default_factory=list)  # more known-true triple files, only filtered out of rankings
    preset: str | None = None  # the preset these settings came from (tracegraph/kg/model/presets)
    preset_sha256: str | None = None  # of the preset file's bytes
