"""Vessel masks to trees, and the synthetic retina, against brute force, scipy and networkx.

Held: ``trees_from_mask`` gives one tree per skeleton component (networkx on a brute-force pixel
graph), largest first, each holding every pixel of its component, rooted at its widest skeleton
pixel (scipy's distance transform) or at its pixel nearest the optic disc, with its rank, pixel
count and root rule in ``meta``; components below ``min_nodes`` (10 by default) are left out, at
most ``max_trees`` (1 by default) kept; the refusals word for word. Component order: many equal
sizes stay in raster order of their first pixel, members ascending. The synthetic retina: seed 0
by default and the generator given otherwise, 4 arcades of 7 generations 11 pixels wide by
default; with one generation, 3 arcades leave the disc in their directions, one connected
mask, each a quarter of the image height long and ``width`` wide, at the joints too; a second
generation splits each trunk in two, turning either way, and reaches further, a third further still.
"""

import itertools

import networkx as nx
import numpy as np
import pytest
from scipy.ndimage import distance_transform_edt, label
from skimage.morphology import skeletonize

from tracegraph.errors import DataError
from tracegraph.trees.skeleton import _components, optic_disc_position, retina_like_mask, trees_from_mask


def _skeleton_components(mask):
    """Skeleton pixels and their 8-connected components (networkx), largest first."""
    pix = np.argwhere(skeletonize(mask))
    g = nx.Graph()
    g.add_nodes_from(range(len(pix)))
    for a, b in itertools.combinations(range(len(pix)), 2):
        if np.abs(pix[a] - pix[b]).max() == 1:
            g.add_edge(a, b)
    comps = sorted((sorted(c) for c in nx.connected_components(g)), key=lambda c: (-len(c), c[0]))
    return pix, comps


def _vessels():
    m = np.zeros((60, 80), bool)
    m[3:50, 8:11] = True  # a long vessel, thin at its top end ...
    m[35:47, 4:15] = True  # ... widest near its bottom
    m[20:23, 30:70] = True  # a shorter vessel
    m[40:43, 40:52] = True  # 10 skeleton pixels or so
    m[55, 60:67] = True  # a speck
    return m


def test_one_tree_per_component_rooted_at_its_widest_skeleton_pixel():
    mask = _vessels()
    pix, comps = _skeleton_components(mask)
    width = distance_transform_edt(mask)
    big = [c for c in comps if len(c) >= 5]
    trees = trees_from_mask(mask, max_trees=10, min_nodes=5)
    assert len(trees) == len(big)
    for rank, (t, c) in enumerate(zip(trees, big)):
        assert t.meta["component"] == rank and t.meta["skeleton_pixels"] == len(c) and t.meta["root"] == "widest"
        assert sorted(map(tuple, t.pos.tolist())) == sorted(map(tuple, pix[c].astype(float).tolist()))
        w = width[tuple(pix[c].T)]
        assert width[tuple(t.pos[0].astype(int))] == w.max()
    assert width[tuple(pix[big[0][0]])] < width[tuple(trees[0].pos[0].astype(int))]  # not its first pixel


def test_trees_rooted_at_the_pixel_nearest_the_optic_disc():
    mask = _vessels()
    pix, comps = _skeleton_components(mask)
    disc = optic_disc_position(mask)
    trees = trees_from_mask(mask, max_trees=2, root="disc", min_nodes=5)
    assert len(trees) == 2
    for t, c in zip(trees, comps):
        d = np.linalg.norm(pix[c] - disc, axis=1)
        assert t.pos[0].tolist() == pix[c][np.argmin(d)].astype(float).tolist() and t.meta["root"] == "disc"


def test_ten_skeleton_pixels_by_default_and_one_tree():
    mask = np.zeros((20, 40), bool)
    mask[2, 2:22] = True  # 20 pixels
    mask[8, 2:12] = True  # exactly 10
    mask[14, 2:11] = True  # 9
    assert [len(c) for c in _skeleton_components(mask)[1]] == [20, 10, 9]
    assert [t.meta["skeleton_pixels"] for t in trees_from_mask(mask)] == [20]
    assert [t.meta["skeleton_pixels"] for t in trees_from_mask(mask, max_trees=5)] == [20, 10]
    assert [t.meta["skeleton_pixels"] for t in trees_from_mask(mask, max_trees=5, min_nodes=9)] == [20, 10, 9]


def test_mask_refusals_word_for_word():
    mask = np.zeros((10, 10), bool)
    mask[2, 2:8] = True
    with pytest.raises(DataError, match=r"^image root must be 'widest' or 'disc', not 'centre'$"):
        trees_from_mask(mask, root="centre")
    with pytest.raises(DataError, match=r"^no vessel component has 10 or more skeleton pixels$"):
        trees_from_mask(mask)


@pytest.mark.parametrize("columns", [False, True])
def test_many_equal_components_stay_in_raster_order_members_ascending(columns):
    mask = np.zeros((30, 60), bool)
    mask[1::3, 1:60:3] = True  # 200 single pixels
    mask[10, 20:58] = True  # a 38-pixel line through some of them
    if columns:
        mask[:, 0] = mask[:, 59] = True  # two columns: members far apart in raster order
    coords = np.argwhere(mask).astype(float)
    pairs = np.array(
        [(a, b) for a, b in itertools.combinations(range(len(coords)), 2) if np.abs(coords[a] - coords[b]).max() == 1]
    )
    got = _components(coords, pairs)
    g = nx.Graph()
    g.add_nodes_from(range(len(coords)))
    g.add_edges_from(map(tuple, pairs))
    want = sorted((sorted(c) for c in nx.connected_components(g)), key=lambda c: (-len(c), c[0]))
    assert [c.tolist() for c in got] == want


SMALL = (240, 360)


def test_synthetic_retina_defaults_and_its_generator():
    base = retina_like_mask(SMALL)
    assert base.dtype == bool and base.shape == SMALL
    assert np.array_equal(base, retina_like_mask(SMALL, np.random.default_rng(0), arcades=4, depth=7, width=11.0))
    other = retina_like_mask(SMALL, np.random.default_rng(1))
    assert not np.array_equal(base, other)
    assert np.array_equal(other, retina_like_mask(SMALL, np.random.default_rng(1)))


H, W = 400, 600
DISC = np.array([H / 2, 0.3 * W])


def _one_generation(seed, depth=1):
    return retina_like_mask((H, W), np.random.default_rng(seed), arcades=3, depth=depth, width=10.0)


@pytest.mark.parametrize("seed", range(4))
def test_one_generation_is_three_arcades_a_quarter_height_long_in_their_directions(seed):
    m = _one_generation(seed)
    assert m[tuple(DISC.astype(int))]
    assert label(m, structure=np.ones((3, 3)))[1] == 1  # connected: every piece joins the next
    pix = np.argwhere(m)
    d = np.linalg.norm(pix - DISC, axis=1)
    assert 0.9 * H / 4 < d.max() < H / 4 + 5 + 1.5  # six pieces of H/24, a little wiggle, r = 5 at the end
    ang = np.arctan2(pix[:, 0] - DISC[0], pix[:, 1] - DISC[1])  # (row, col) = (sin, cos)
    target = 2 * np.pi * (np.arange(3) + 0.5) / 3
    off = np.abs((ang[:, None] - target[None] + np.pi) % (2 * np.pi) - np.pi)
    far = d > H / 8
    assert (off[far].min(1) < 0.9).all()  # every far pixel lies along one of the arcades
    for k in range(3):  # and every arcade reaches far along its own direction
        assert (d[off[:, k] < 0.9] > 0.8 * H / 4).any()


@pytest.mark.parametrize("seed", range(4))
def test_one_generation_trunks_are_as_wide_as_asked(seed):
    m = _one_generation(seed)
    width = distance_transform_edt(m)
    sk = np.argwhere(skeletonize(m))
    d = np.linalg.norm(sk - DISC, axis=1)
    mid = width[tuple(sk[(d > 15) & (d < 80)].T)]  # away from the disc's overlap and the tips
    assert abs(np.median(mid) - 5) <= 0.5 and mid.min() >= 5 - 1.5 and mid.max() <= 5 + 1


@pytest.mark.parametrize("seed", range(4))
def test_a_second_generation_branches_beyond_the_trunks(seed):
    d1 = np.linalg.norm(np.argwhere(_one_generation(seed)) - DISC, axis=1).max()
    d2 = np.linalg.norm(np.argwhere(_one_generation(seed, depth=2)) - DISC, axis=1).max()
    assert d1 < 1.1 * H / 4 < 1.35 * H / 4 < d2 < 1.9 * H / 4  # children 60-80 % as long, turned by about 35°
    d3 = np.linalg.norm(np.argwhere(_one_generation(seed, depth=3)) - DISC, axis=1).max()
    assert d3 > 1.95 * H / 4  # and a third generation further still


def test_thin_vessels_keep_their_width_at_the_joints():
    for seed in range(2):  # trunks 1 pixel in half-width; their children no thinner than 1 either
        m = retina_like_mask((H, W), np.random.default_rng(seed), arcades=3, depth=2, width=2.0)
        pix = np.argwhere(m)
        away = pix[np.linalg.norm(pix - DISC, axis=1) > 10]  # where the arcades overlap, they are wider
        width = distance_transform_edt(m)[tuple(away.T)]
        assert (width >= 2).sum() <= 5  # a 1-pixel half-width, joints too (a fork's overlap may reach 2)


@pytest.mark.parametrize("seed", range(4))
def test_each_arcade_ends_near_its_own_direction(seed):
    m = _one_generation(seed)
    pix = np.argwhere(m)
    far = np.zeros_like(m)
    far[tuple(pix[np.linalg.norm(pix - DISC, axis=1) > 0.75 * H / 4].T)] = True
    tips, n = label(far, structure=np.ones((3, 3)))
    assert n == 3
    ends = [np.argwhere(tips == c).mean(0) - DISC for c in range(1, 4)]
    angles = np.sort([np.arctan2(e[0], e[1]) % (2 * np.pi) for e in ends])
    # arcade k leaves at 2π(k + 1/2)/3 plus normal noise of 0.2 rad, then wiggles
    assert np.abs(angles - 2 * np.pi * (np.arange(3) + 0.5) / 3).max() < 0.7


def test_each_trunk_splits_in_two_turning_either_way():
    target = 2 * np.pi * (np.arange(3) + 0.5) / 3
    six, spreads = 0, []
    for seed in range(20):
        m = _one_generation(seed, depth=2)
        pix = np.argwhere(m)
        far = np.zeros_like(m)
        far[tuple(pix[np.linalg.norm(pix - DISC, axis=1) > 1.25 * H / 4].T)] = True
        tips, n = label(far, structure=np.ones((3, 3)))  # the children's ends, past where any trunk reaches
        six += n == 6
        angles = []
        for c in range(1, n + 1):
            q = np.argwhere(tips == c) - DISC
            q = q[np.argmax(np.linalg.norm(q, axis=1))]  # the tip's farthest pixel
            angles.append(np.arctan2(q[0], q[1]))
        off = (np.array(angles)[:, None] - target[None] + np.pi) % (2 * np.pi) - np.pi
        arcade = np.argmin(np.abs(off), axis=1)
        spreads += [np.ptp(off[arcade == k, k]) for k in range(3) if (arcade == k).sum() == 2]
    # two tips per arcade in (nearly) every tree. Children ~70 px long turn by ±35° (sd 8°) from a
    # trunk ~95 px long: seen from the disc atan(70 sin 35° / (95 + 70 cos 35°)) = 0.26 rad either
    # side, pairs 0.52 rad apart; the wiggles spread that by about 0.17 (4 standard errors)
    assert six >= 17 and len(spreads) >= 50
    assert abs(np.mean(spreads) - 0.52) < 4 * 0.17 / np.sqrt(len(spreads))
