import numpy as np
import pytest

from tracegraph.errors import DataError
from tracegraph.trees.skeleton import draw_tree, planar_tree, tree_from_image


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_skeleton_recovers_drawn_tree(seed):
    rng = np.random.default_rng(seed)
    t = planar_tree(rng, size=160, depth=4, length=40)
    img = draw_tree(t, (160, 160), radius=1)
    r = tree_from_image(img, root=t.pos[0])
    # same topology: branch points and leaves; same length within 10 %; root near the drawn root
    assert (r.children_count() >= 2).sum() == (t.children_count() >= 2).sum()
    assert (r.children_count() == 0).sum() == (t.children_count() == 0).sum()
    assert r.total_length() == pytest.approx(t.total_length(), rel=0.10)
    assert np.linalg.norm(r.pos[0] - t.pos[0]) < 4
    assert r.num_nodes >= t.num_nodes


def test_empty_image_is_an_error():
    with pytest.raises(DataError, match="no foreground"):
        tree_from_image(np.zeros((20, 20), bool))
