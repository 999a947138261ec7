"""A directory of the user's trees: SWC files, binary vessel images and graph files.

Every file is named by its stem (``a.swc`` → ``a``), which is what the labels CSV refers to.
SWC files give one tree; a vessel image gives one tree per large component; a graph file
(``.json`` or ``.npz`` with node positions and edges, optionally a root) gives its spanning
tree. Every tree is then resampled by arc length and capped at a node budget.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from tracegraph.errors import DataError
from tracegraph.runtime.checkpoints import atomic_path, atomic_write_text
from tracegraph.runtime.textfiles import strip_bom
from tracegraph.trees.data import Tree, read_swc, tree_from_graph
from tracegraph.trees.resample import fit_to_budget

SWC_SUFFIXES = (".swc",)
IMAGE_SUFFIXES = (".png", ".tif", ".tiff", ".jpg", ".jpeg", ".bmp", ".gif")
GRAPH_SUFFIXES = (".json", ".npz")
TREE_SUFFIXES = SWC_SUFFIXES + IMAGE_SUFFIXES + GRAPH_SUFFIXES


def list_tree_files(directory: str | Path) -> dict[str, Path]:
    """Every tree file in ``directory`` (not recursive), by stem, sorted.

    Args:
        directory: The folder.

    Returns:
        Stem to file.

    Raises:
        DataError: If the folder is missing, holds no tree file, or two files share a stem.
    """
    d = Path(directory)
    if not d.is_dir():
        raise DataError("trees directory not found (or not a directory)", d)
    found: dict[str, Path] = {}
    for f in sorted(d.iterdir()):
        if f.is_file() and f.suffix.lower() in TREE_SUFFIXES:
            if f.stem in found:  # the labels CSV names files by stem: two files, one name
                raise DataError(f"two tree files share the name {f.stem!r} ({found[f.stem].name} and {f.name})", d)
            found[f.stem] = f
    if not found:
        raise DataError(f"no tree files ({', '.join('*' + s for s in TREE_SUFFIXES)})", d)
    return dict(sorted(found.items()))


def read_graph_file(path: str | Path) -> Tree:
    """Read a tree from a graph file.

    Args:
        path: A ``.json`` file ``{"pos": [[x, y(, z)], ...], "edges": [[i, j], ...], "root": i}``
            (``root`` optional) or an ``.npz`` with the same arrays.

    Returns:
        The graph's Euclidean minimum spanning tree, rooted at ``root`` (default 0).

    Raises:
        DataError: If the file is unreadable or the arrays are malformed.
    """
    p = Path(path)
    try:
        if p.suffix.lower() == ".json":
            obj = json.loads(strip_bom(p.read_text(encoding="utf-8"), p))
            if not isinstance(obj, dict):
                raise DataError("expected a JSON object with 'pos' and 'edges'", p)
            fields = obj
        else:
            with np.load(p, allow_pickle=False) as z:
                fields = {k: z[k] for k in z.files}
    except DataError:
        raise
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read graph file ({type(e).__name__}: {e})", p) from None
    missing = [k for k in ("pos", "edges") if k not in fields]
    if missing:
        raise DataError(f"graph file lacks {' and '.join(repr(k) for k in missing)}", p)
    try:
        pos = np.asarray(fields["pos"], dtype=np.float64)
        edges = np.asarray(fields["edges"], dtype=np.int64)
    except (ValueError, TypeError) as e:
        raise DataError(f"'pos' and 'edges' must be numeric arrays ({e})", p) from None
    if pos.ndim != 2 or pos.shape[1] not in (2, 3) or not np.isfinite(pos).all():
        raise DataError(f"'pos' must be an (N, 2) or (N, 3) array of finite numbers, got shape {pos.shape}", p)
    try:
        return tree_from_graph(edges, pos, root=int(np.asarray(fields.get("root", 0))), method="mst")
    except DataError as e:
        raise DataError(e.reason, p) from None


def read_tree_file(
    path: str | Path,
    max_nodes: int = 300,
    node_spacing: float = 0.0,
    trees_per_image: int = 1,
    image_root: str = "widest",
) -> list[Tree]:
    """Read the tree(s) in one file, resampled at ``node_spacing`` and fitted to ``max_nodes``, named by stem.

    Args:
        path: An SWC, graph (.json/.npz) or vessel image file.
        max_nodes: Most nodes per tree.
        node_spacing: Arc-length spacing to resample at; 0 only applies the ``max_nodes`` cap.
        trees_per_image: Images: the largest vessel components, one tree each.
        image_root: Images: ``"widest"`` point of a component or ``"disc"`` (optic disc).

    Returns:
        The trees.

    Raises:
        DataError: If the file is unreadable or malformed.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in SWC_SUFFIXES:
        trees = [read_swc(p)]
    elif suffix in GRAPH_SUFFIXES:
        trees = [read_graph_file(p)]
    elif suffix in IMAGE_SUFFIXES:
        from tracegraph.trees.skeleton import read_mask, trees_from_mask

        try:
            trees = trees_from_mask(read_mask(p), trees_per_image, image_root)
        except DataError as e:
            if e.path is not None:
                raise
            raise DataError(e.reason, p) from None
    else:
        raise DataError(f"not a tree file (expected one of {', '.join(TREE_SUFFIXES)})", p)
    out = []
    for t in trees:
        t = fit_to_budget(t, max_nodes, node_spacing)
        t.name = p.stem
        t.meta["source"] = p.name
        out.append(t)
    return out


TREE_CACHE_FORMAT = b"tracegraph-tree-file-v1"


def cached_tree_file(path: str | Path, cache_dir: str | Path | None, **options) -> list[Tree]:
    """:func:`read_tree_file`, remembered in ``cache_dir`` by the file's bytes and the options.

    Skeletonising a 3504x2336 mask takes seconds; pretraining, fine-tuning, probing and every fold
    read the same files again. The cache is an ``.npz`` (no pickle) per file and option set.

    Args:
        path: The tree file.
        cache_dir: The cache directory, or None for no cache.
        **options: Options of :func:`read_tree_file`.

    Returns:
        The trees.

    Raises:
        DataError: If the file is unreadable or malformed.
    """
    if cache_dir is None:
        return read_tree_file(path, **options)
    h = hashlib.sha256(TREE_CACHE_FORMAT)
    h.update(json.dumps(options, sort_keys=True).encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    target = Path(cache_dir) / f"trees-{Path(path).stem}-{h.hexdigest()[:24]}.npz"
    if target.exists():
        try:
            with np.load(target, allow_pickle=False) as z:
                offsets, pos, parent, metas = z["offsets"], z["pos"], z["parent"], json.loads(str(z["meta"]))
        except Exception as e:  # noqa: BLE001 - a corrupt cache file is the user's to delete
            raise DataError(f"unreadable tree cache ({e}); delete it to rebuild", target) from None
        return [
            Tree(pos[a:b].copy(), parent[a:b].copy(), name=Path(path).stem, meta=m)
            for a, b, m in zip(offsets[:-1], offsets[1:], metas)
        ]
    trees = read_tree_file(path, **options)
    offsets = np.concatenate([[0], np.cumsum([t.num_nodes for t in trees])]).astype(np.int64)
    dim = max(t.pos.shape[1] for t in trees)
    pos = np.concatenate([np.pad(t.pos, ((0, 0), (0, dim - t.pos.shape[1]))) for t in trees])
    with atomic_path(target, suffix=".npz") as tmp:
        with open(tmp, "wb") as f:  # a file object stops numpy from appending another ".npz"
            np.savez_compressed(
                f,
                offsets=offsets,
                pos=pos,
                parent=np.concatenate([t.parent for t in trees]),
                meta=np.array(json.dumps([t.meta for t in trees])),
            )
    return trees


def write_swc(tree: Tree, path: str | Path) -> None:
    """Write a tree as SWC (ids from 1, type 0, radius 1), atomically.

    Args:
        tree: The tree.
        path: The destination file.
    """
    pos = tree.pos if tree.pos.shape[1] == 3 else np.pad(tree.pos, ((0, 0), (0, 3 - tree.pos.shape[1])))
    lines = ["# id type x y z radius parent"]
    for i in range(tree.num_nodes):
        par = -1 if i == 0 else int(tree.parent[i]) + 1
        lines.append(f"{i + 1} 0 {pos[i, 0]:.6g} {pos[i, 1]:.6g} {pos[i, 2]:.6g} 1 {par}")
    atomic_write_text(path, "\n".join(lines) + "\n")
