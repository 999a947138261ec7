import numpy as np
import pytest
from scipy.ndimage import distance_transform_edt

from tests.trees.labelled_fixtures import write_png
from tracegraph.trees.synthetic import synthetic_tree
from tracegraph.trees.labelled import load_dataset
from tracegraph.trees.resample import fit_to_budget, resample_by_arc_length
from tracegraph.trees.skeleton import optic_disc_position, retina_like_mask, trees_from_mask


def _kept_ancestor_naive(tree, kept: set[int], i: int) -> tuple[int, float]:
    """Walk up from i to the first kept node, summing edge lengths."""
    length, j = 0.0, i
    while True:
        p = int(tree.parent[j])
        length += float(np.linalg.norm(tree.pos[j] - tree.pos[p]))
        if p in kept:
            return p, length
        j = p


@pytest.mark.parametrize("spacing", [0.5, 2.5, 6.0])
def test_arc_length_resampling_against_a_naive_walk(spacing):
    t = synthetic_tree(1, np.random.default_rng(3), max_nodes=400)
    r = resample_by_arc_length(t, spacing)
    # map resampled nodes back to the original ones by position (positions are distinct here)
    where = {tuple(p): i for i, p in enumerate(t.pos)}
    old = [where[tuple(p)] for p in r.pos]
    kept = set(old)
    nch = t.children_count()
    assert {0} | set(np.flatnonzero(nch != 1)) <= kept  # root, leaves and branch points survive
    step = t.edge_lengths().max()
    for k in range(1, r.num_nodes):
        anc, length = _kept_ancestor_naive(t, kept, old[k])
        assert old[r.parent[k]] == anc
        assert length < spacing + step  # never more than one spacing (plus the last edge) apart
        if nch[old[k]] == 1:  # a chain point is only kept once a full spacing has passed
            assert length >= spacing - 1e-9
    assert r.num_nodes < t.num_nodes or spacing <= step


def test_budget_widens_the_spacing_or_truncates():
    t = synthetic_tree(0, np.random.default_rng(0), max_nodes=2000)
    f = fit_to_budget(t, 300, spacing=1.0)
    assert f.num_nodes <= 300 and f.meta["node_spacing"] > 1.0 and "truncated" not in f.meta
    assert (f.children_count() >= 2).sum() == (t.children_count() >= 2).sum()
    g = fit_to_budget(t, 30)
    assert g.num_nodes == 30 and g.meta["truncated"]
    assert fit_to_budget(t, 5000) is t


def test_mask_components_largest_first_rooted_at_the_widest_point():
    img = np.zeros((120, 200), dtype=bool)
    img[10:110, 20:26] = True  # long vessel, thick at its top end
    img[10:30, 14:32] = True
    img[60:62, 100:190] = True  # shorter thin vessel
    img[90:91, 150:160] = True  # a speck below min_nodes
    trees = trees_from_mask(img, max_trees=5, root="widest", min_nodes=20)
    assert len(trees) == 2 and trees[0].meta["skeleton_pixels"] > trees[1].meta["skeleton_pixels"]
    width = distance_transform_edt(img)
    r = np.rint(trees[0].pos[0]).astype(int)
    assert width[tuple(r)] >= 0.9 * width[:, :40].max() and r[0] < 30


def test_optic_disc_is_where_thick_vessels_converge():
    h, w = 300, 450
    m = retina_like_mask((h, w), np.random.default_rng(1), width=6, depth=5)
    disc = optic_disc_position(m)
    assert np.linalg.norm(disc - [h / 2, w * 0.3]) < h / 6
    (t,) = trees_from_mask(m, root="disc")
    assert np.linalg.norm(t.pos[0] - disc) < h / 6


@pytest.mark.slow
def test_a_full_size_vessel_mask_becomes_a_bounded_tree(tmp_path):
    m = retina_like_mask((2336, 3504), np.random.default_rng(0))
    write_png(m, tmp_path / "eye.png")
    (d,) = load_dataset(tmp_path, node_spacing=20, max_nodes=500, image_root="disc")
    assert 100 < d.num_nodes <= 500
    deg = np.bincount(d.edge_index[0].numpy(), minlength=d.num_nodes)
    # a node of degree k starts at most k(k-1)^2 non-backtracking chains: linear in N on trees
    assert d.paths.shape[1] <= int((deg * (deg - 1) ** 2).sum()) and deg.max() <= 4
    assert float(d.pos.max()) > 2000  # pixel units of the full image, not a thumbnail
