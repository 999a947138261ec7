"""Vessel images to pixel graphs and back, against brute force and hand-worked images.

Held: the skeleton's pixel graph is scikit-image's skeleton pixels (raster order) joined to every
8- (2-D) or 26- (3-D) neighbour exactly once, as a brute-force scan of all pixel pairs finds them,
with nothing joined across the image border; the refusals (not 2-D or 3-D, no foreground) word for
word; components largest first, equal sizes in raster order of their first pixel (against
networkx); a line drawn by hand becomes a tree rooted at its first pixel, or at the pixel nearest
the root asked for, thinned to every third pixel; the optic disc at the peak of the squared width's
box mean (a numpy loop with mirrored borders), the window 1/8 of the shorter side and at least 3;
masks read from PNG and TIFF files (the threshold halfway between the darkest and brightest
value, colour by its brightest channel, alpha ignored) and their refusals with the file named;
trees drawn along Bresenham lines, clipped at the image's edges, thickened by a disk.
"""

import itertools

import networkx as nx
import numpy as np
import pytest
from skimage.io import imsave
from skimage.morphology import skeletonize

from tracegraph.errors import DataError
from tracegraph.trees.data import Tree
from tracegraph.trees.skeleton import (
    _components,
    draw_tree,
    optic_disc_position,
    planar_tree,
    read_mask,
    skeleton_graph,
    tree_from_image,
)


def _pairs_brute_force(coords):
    """Every pair of pixels at most one step apart along each axis, as a set of index pairs."""
    out = set()
    for a, b in itertools.combinations(range(len(coords)), 2):
        if np.abs(coords[a] - coords[b]).max() == 1:
            out.add(frozenset((a, b)))
    return out


def _border_mask():
    m = np.zeros((5, 7), bool)
    m[0, 0] = m[1, 6] = m[4, 3] = True  # (0,0) and (1,6) would touch if a column -1 wrapped round
    m[4, 6] = m[3, 5] = True  # a diagonal pair in the last row and column
    m[2, 1:4] = True
    return m


@pytest.mark.parametrize("which", ["drawn tree", "border", "3-D"])
def test_pixel_graph_joins_every_neighbouring_skeleton_pixel_once(which):
    if which == "drawn tree":
        mask = draw_tree(planar_tree(np.random.default_rng(0), size=64, depth=3, length=16), (64, 64), 1)
    elif which == "border":
        mask = _border_mask()
    else:
        mask = np.zeros((6, 7, 8), bool)
        for q in range(5):
            mask[q, q, q] = mask[q, 5 - q, 6] = True
        mask[0, 6, 7] = mask[5, 0, 0] = True  # opposite corners: no wrap-around along any axis
    coords, pairs = skeleton_graph(mask)
    want = np.argwhere(skeletonize(mask.astype(bool)))
    assert coords.dtype == np.float64 and coords.tolist() == want.tolist()
    assert pairs.shape[1] == 2
    found = [frozenset(map(int, p)) for p in pairs]
    assert len(found) == len(set(found))  # each pair once, no pixel joined to itself
    assert set(found) == _pairs_brute_force(want)


def test_pixel_graph_refuses_other_dimensions_and_empty_images():
    with pytest.raises(DataError, match=r"^image must be 2-D or 3-D, got 1-D$"):
        skeleton_graph(np.ones(5))
    with pytest.raises(DataError, match=r"^image must be 2-D or 3-D, got 4-D$"):
        skeleton_graph(np.ones((2, 2, 2, 2)))
    with pytest.raises(DataError, match=r"^the image has no foreground to skeletonise$"):
        skeleton_graph(np.zeros((4, 4)))


def test_components_largest_first_and_equal_sizes_in_raster_order():
    mask = np.zeros((9, 12), bool)
    mask[0, 8:11] = True  # 3 pixels, first in raster order
    mask[2, 0:3] = True  # 3 pixels
    mask[4:9, 5] = True  # 5 pixels
    mask[7, 0] = True  # 1 pixel
    coords, pairs = skeleton_graph(mask)
    g = nx.Graph()
    g.add_nodes_from(range(len(coords)))
    g.add_edges_from(map(tuple, pairs))
    comps = sorted((sorted(c) for c in nx.connected_components(g)), key=lambda c: (-len(c), c[0]))
    got = _components(coords, pairs)
    assert [c.tolist() for c in got] == comps
    assert [len(c) for c in got] == [5, 3, 3, 1] and coords[got[1][0]].tolist() == [0.0, 8.0]


def _line_image():
    img = np.zeros((12, 16), bool)
    img[5, 2:14] = True  # one pixel wide: its own skeleton, columns 2..13
    img[9, 3:6] = True  # a smaller piece, left out
    return img


def test_a_line_becomes_a_chain_rooted_at_its_first_pixel_keeping_every_third():
    t = tree_from_image(_line_image())
    # 12 pixels in a row from column 2: the root, then every third pixel, then the end (a leaf)
    assert t.pos.tolist() == [[5.0, c] for c in (2, 5, 8, 11, 13)]
    assert t.parent.tolist() == [0, 0, 1, 2, 3]


def test_a_line_rooted_at_the_pixel_nearest_the_root_asked_for():
    t = tree_from_image(_line_image(), root=(4.0, 20.0), keep_every=4)
    assert t.pos.tolist() == [[5.0, c] for c in (13, 9, 5, 2)]
    t1 = tree_from_image(_line_image(), root=(6.0, 7.2), keep_every=1)  # keep every pixel
    assert t1.pos[0].tolist() == [5.0, 7.0] and t1.num_nodes == 12


def _box_mean_naive(a, size):
    """Mean over a size×size window centred on each pixel, borders mirrored (a b c | c b a)."""
    half = size // 2
    padded = np.pad(a, half, mode="symmetric")
    out = np.zeros_like(a, dtype=np.float64)
    for r in range(a.shape[0]):
        for c in range(a.shape[1]):
            out[r, c] = padded[r : r + size, c : c + size].mean()
    return out


@pytest.mark.parametrize("shape, size", [((16, 30), 3), ((40, 44), 5)])
def test_optic_disc_at_the_peak_of_the_squared_width_box_mean(shape, size):
    rng = np.random.default_rng(shape[0])
    mask = rng.random(shape) < 0.3
    width = rng.random(shape) * mask * 3
    got = optic_disc_position(mask, width)
    density = _box_mean_naive(width * width, size)
    assert got.dtype == np.float64
    assert got.tolist() == list(np.unravel_index(np.argmax(density), shape))


def test_optic_disc_weighs_one_thick_vessel_over_many_thin_ones():
    mask = np.zeros((24, 40), bool)
    width = np.zeros((24, 40))
    width[3:6, 3:6] = 2.0  # nine thin pixels: width sum 18, squared 36
    width[15, 29:32] = width[14:17, 30] = 3.2  # a thick plus: width sum 16.8, squared 56.96
    width[15, 30] = 4.0
    mask[width > 0] = True
    assert optic_disc_position(mask, width).tolist() == [15.0, 30.0]


def test_optic_disc_from_the_mask_alone_uses_its_distance_transform():
    mask = np.zeros((24, 40), bool)
    mask[2:5, 1:39] = True  # a long vessel 3 wide
    mask[12:21, 20:29] = True  # a 9×9 block: the widest place
    assert optic_disc_position(mask).tolist() == [16.0, 24.0]


def _write(img, path):
    imsave(path, img, check_contrast=False)
    return path


def test_mask_is_brighter_than_halfway_from_the_darkest_to_the_brightest(tmp_path):
    grey = np.array([[50, 120, 126], [200, 125, 50]], dtype=np.uint8)  # halfway: 125
    got = read_mask(_write(grey, tmp_path / "g.png"))
    assert got.dtype == bool and got.tolist() == [[False, False, True], [True, False, False]]


def test_colour_masks_take_the_brightest_channel_and_ignore_alpha(tmp_path):
    rgb = np.zeros((2, 5, 3), dtype=np.uint8)
    rgb[0, 0] = [0, 0, 200]
    rgb[1, 2] = [180, 0, 0]
    rgb[0, 1] = [80, 80, 80]  # below halfway (100) in every channel
    want = np.zeros((2, 5), bool)
    want[0, 0] = want[1, 2] = True
    assert read_mask(_write(rgb, tmp_path / "c.png")).tolist() == want.tolist()
    rgba = np.concatenate([rgb, np.full((2, 5, 1), 255, np.uint8)], axis=-1)
    rgba[1, 0, 3] = 0  # alpha alone never makes a vessel
    assert read_mask(_write(rgba, tmp_path / "a.png")).tolist() == want.tolist()


def test_mask_files_refused_with_the_file_named(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    with pytest.raises(DataError, match=r"(?s)^.*bad\.png: cannot read image \((?!NoneType)\w+: .+\)$") as e:
        read_mask(bad)
    assert e.value.path == str(bad)
    stack = _write(np.arange(210, dtype=np.uint8).reshape(6, 5, 7), tmp_path / "stack.tif")
    with pytest.raises(DataError, match=r"stack\.tif: expected a 2-D \(grey or colour\) image, got shape \(6, 5, 7\)$"):
        read_mask(stack)
    blank = _write(np.full((3, 4), 7, np.uint8), tmp_path / "blank.png")
    with pytest.raises(DataError, match=r"blank\.png: the image is blank \(one grey value\): no vessels$"):
        read_mask(blank)


def _tree(points, parent):
    return Tree(np.array(points, dtype=np.float64), np.array(parent))


def test_drawn_tree_is_its_segments_pixels_rounded_to_the_nearest_pixel():
    t = _tree([[2.4, 1.6], [2.0, 6.0], [5.2, 6.0], [4.0, 9.0]], [0, 0, 1, 1])
    got = draw_tree(t, (8, 11), radius=0)
    want = np.zeros((8, 11), bool)
    want[2, 2:7] = True  # (2, 2) to (2, 6)
    want[2:6, 6] = True  # (2, 6) to (5, 6)
    want[[2, 3, 3, 4], [6, 7, 8, 9]] = True  # (2, 6) to (4, 9): Bresenham, a step down at every other column
    assert got.dtype == bool and got.tolist() == want.tolist()


def test_drawn_segments_are_clipped_at_every_edge_not_wrapped():
    t = _tree([[-3.0, 2.0], [3.0, 2.0], [3.0, 9.0], [9.0, 9.0], [3.0, -2.0], [9.0, 4.0]], [0, 0, 1, 2, 1, 1])
    got = draw_tree(t, (6, 7), radius=0)
    want = np.zeros((6, 7), bool)
    want[0:4, 2] = True  # rows -3..3 of column 2: only 0..3 inside
    want[3, 0:7] = True  # columns -2..9 of row 3: only 0..6 inside
    want[[4, 5], [2, 3]] = True  # (3, 2) to (9, 4): columns 2,2,3,3,3,4,4 down rows 3..9; rows 4, 5 inside
    assert got.tolist() == want.tolist()  # (3..9, 9) lies wholly outside


def test_drawn_tree_thickened_by_a_disk_of_the_radius():
    t = _tree([[4.0, 2.0], [4.0, 7.0]], [0, 0])
    want = np.zeros((9, 10), bool)
    want[4, 2:8] = True
    for radius in (1, 2):
        grown = np.zeros_like(want)
        for r, c in np.argwhere(want):
            for dr in range(-radius, radius + 1):
                for dc in range(-radius, radius + 1):
                    if dr * dr + dc * dc <= radius * radius:
                        grown[r + dr, c + dc] = True
        assert draw_tree(t, (9, 10), radius=radius).tolist() == grown.tolist()


def _turns_and_ratios(t):
    """Each non-trunk segment's signed turn from its parent segment (degrees) and length ratio."""
    turns, ratios, siblings = [], [], {}
    for c in range(2, t.num_nodes):
        p = t.parent[c]
        seg, up = t.pos[c] - t.pos[p], t.pos[p] - t.pos[t.parent[p]]
        cross = up[0] * seg[1] - up[1] * seg[0]
        turns.append(np.degrees(np.arctan2(cross, np.dot(up, seg))))
        ratios.append(np.linalg.norm(seg) / np.linalg.norm(up))
        siblings.setdefault(int(p), []).append(turns[-1])
    return np.array(turns), np.array(ratios), siblings


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_planar_tree_is_a_binary_tree_grown_up_from_the_bottom_centre(depth):
    t = planar_tree(np.random.default_rng(depth), size=100, depth=depth, length=20.0)
    assert t.num_nodes == 2**depth  # the root, the trunk's end, then two children per generation
    assert t.pos[:2].tolist() == [[96.0, 50.0], [76.0, 50.0]]  # the trunk points up (rows fall)
    assert (t.parent[1:] < np.arange(1, t.num_nodes)).all()  # parents first
    kids = t.children_count()
    assert kids[0] == 1 and (kids[1:] == 0).sum() == 2 ** (depth - 1) and set(kids[1:]) <= {0, 2}


@pytest.mark.parametrize("angle", [60.0, 90.0])
def test_planar_tree_branches_split_by_the_angle_and_shorten_by_60_to_80_percent(angle):
    turns, ratios, residuals = [], [], []
    for seed in range(10):
        t = planar_tree(np.random.default_rng(seed), size=400, depth=6, length=60.0, angle_deg=angle)
        tu, ra, sib = _turns_and_ratios(t)
        turns.append(tu), ratios.append(ra)
        for pair in sib.values():
            lo, hi = sorted(pair)  # one child turns each way: about -angle/2 and +angle/2
            residuals += [lo + angle / 2, hi - angle / 2]
    ratios, residuals = np.concatenate(ratios), np.array(residuals)
    n = len(residuals)  # 620 turns, each angle/2 plus normal noise of 5 degrees
    assert n == 620 and ratios.min() >= 0.6 and ratios.max() <= 0.8
    assert abs(ratios.mean() - 0.7) < 4 * (0.2 / np.sqrt(12)) / np.sqrt(n)  # uniform on [0.6, 0.8]
    assert abs(residuals.mean()) < 4 * 5 / np.sqrt(n)
    assert abs(residuals.std() - 5) < 4 * 5 / np.sqrt(2 * n)


def test_drawn_tree_ignores_depth_and_a_lone_root_draws_nothing():
    flat = _tree([[1.0, 1.0], [1.0, 5.0], [4.0, 5.0]], [0, 0, 1])
    deep = _tree([[1.0, 1.0, 7.0], [1.0, 5.0, -2.0], [4.0, 5.0, 3.0]], [0, 0, 1])
    assert draw_tree(deep, (6, 7)).tolist() == draw_tree(flat, (6, 7)).tolist()
    assert not draw_tree(_tree([[2.0, 2.0]], [0]), (5, 5), radius=0).any()


def test_drawing_defaults_to_lines_one_pixel_thick_either_side():
    t = _tree([[4.0, 2.0], [4.0, 7.0]], [0, 0])
    want = np.zeros((9, 10), bool)
    want[3:6, 2:8] = True
    want[4, [1, 8]] = True  # disk(1) is a plus: the ends grow by one pixel, not their corners
    assert draw_tree(t, (9, 10)).tolist() == want.tolist()


def test_planar_tree_defaults():
    a = planar_tree(np.random.default_rng(7))
    b = planar_tree(np.random.default_rng(7), size=128, depth=4, length=30.0, angle_deg=60.0)
    assert a.pos.tolist() == b.pos.tolist() and a.parent.tolist() == b.parent.tolist()
