"""A small UMLS run and the first-principles readers the run-object tests compare it with:
id maps and triples parsed by hand, checkpoints rebuilt in float64."""

from pathlib import Path

import numpy as np
import torch

from tracegraph.kg.model.conve import ConvE, ConvEConfig

TINY_MODEL = {"embedding_dim": 32, "embedding_height": 4, "embedding_width": 8, "output_channels": 4}
QUERY = ("steroid", "interacts_with", "eicosanoid")  # the first UMLS test triple


def labels_of(path: Path) -> list[str]:
    """node_dict.txt read by hand: label<TAB>index -> labels in index order."""
    pairs = [line.split("\t") for line in path.read_text().splitlines() if line]
    return [lab for lab, _ in sorted(pairs, key=lambda p: int(p[1]))]


def triples_of(path: Path) -> list[tuple[str, str, str]]:
    """A triples file read by hand: one tab-separated triple a line."""
    return [tuple(line.split("\t")) for line in path.read_text().splitlines() if line]


def float64_model(path: Path):
    """A checkpoint rebuilt in float64, independently of the Run."""
    payload = torch.load(path, map_location="cpu", weights_only=True)
    model = ConvE(ConvEConfig.from_dict(payload["model_config"]))
    model.load_state_dict(payload["model"])
    return model.double().eval(), float(payload["lr"])


def all_scores(model, h: int, r: int) -> np.ndarray:
    """The score of (h, r, e) for every entity e, one triple at a time (no 1-N shortcut)."""
    n = model.config.num_entities
    with torch.no_grad():
        return model.score_triples(torch.full((n,), h), torch.full((n,), r), torch.arange(n)).numpy()
