"""A small labelled tree directory on disk: SWC files of two synthetic classes and vessel PNGs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tracegraph.trees.synthetic import synthetic_tree
from tracegraph.trees.files import write_swc
from tracegraph.trees.skeleton import draw_tree, planar_tree

# Classes far apart (narrow, long branches vs wide, short, bushy ones), so that a few dozen
# trees suffice to test the pipeline end to end; the subtle 40°/55° pair is the probe study's.
EASY_CLASSES = [
    dict(branch_len=(9.0, 1.5), angle_deg=(30.0, 8.0), tortuosity=0.05, p_branch=0.8),
    dict(branch_len=(3.0, 0.8), angle_deg=(100.0, 10.0), tortuosity=0.3, p_branch=0.95),
]
CLASS_NAMES = ["healthy", "graded"]


def write_png(mask: np.ndarray, path: Path) -> None:
    from skimage.io import imsave

    imsave(path, (np.asarray(mask) * 255).astype(np.uint8), check_contrast=False)


def labelled_dir(
    root: Path, per_class: int = 12, max_nodes: int = 60, seed: int = 0, pngs: int = 2
) -> tuple[Path, Path]:
    """(trees directory, labels CSV). SWC files c{class}-{k}.swc, PNGs vessel-{k}.png (alternating classes)."""
    rng = np.random.default_rng(seed)
    d = root / "trees"
    d.mkdir(parents=True, exist_ok=True)
    rows = ["name,label"]
    for k in range(per_class):
        for c in (0, 1):
            write_swc(synthetic_tree(c, rng, max_nodes=max_nodes, params=EASY_CLASSES), d / f"c{c}-{k}.swc")
            rows.append(f"c{c}-{k},{CLASS_NAMES[c]}")
    for k in range(pngs):
        angle = 40.0 if k % 2 == 0 else 100.0
        write_png(draw_tree(planar_tree(rng, size=128, angle_deg=angle), (128, 128), radius=2), d / f"vessel-{k}.png")
        rows.append(f"vessel-{k},{CLASS_NAMES[k % 2]}")
    labels = root / "labels.csv"
    labels.write_text("\n".join(rows) + "\n")
    return d, labels
