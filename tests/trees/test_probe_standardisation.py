"""The linear probe standardises with the *training* embeddings' mean and spread only: no test
information enters the fit or the scaling. A one-sided test set (one class only, far from the
training mean) is classified by where it lies relative to the training data."""

import torch

from tracegraph.trees.probe import linear_probe, linear_probe_predict


def _two_blobs(n, seed):
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(n, 3, generator=g) + torch.tensor([0.0, 0.0, 0.0])
    x1 = torch.randn(n, 3, generator=g) + torch.tensor([8.0, 0.0, 0.0])
    x = torch.cat([x0, x1]) * 100 + 1000  # scale and offset: standardisation matters for L-BFGS + L2
    return x, torch.cat([torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.long)])


def test_a_one_class_test_set_is_scaled_by_the_training_statistics():
    xtr, ytr = _two_blobs(30, 0)
    xte, _ = _two_blobs(30, 1)
    only_one = xte[30:]  # class 1 only: standardised by its own mean it would sit at the decision boundary
    assert linear_probe(xtr, ytr, only_one, torch.ones(30, dtype=torch.long)) == 1.0
    assert linear_probe(xtr, ytr, xte[:30], torch.zeros(30, dtype=torch.long)) == 1.0


def test_a_test_rows_prediction_does_not_depend_on_the_other_test_rows():
    g = torch.Generator().manual_seed(0)
    xtr = torch.cat([torch.randn(40, 2, generator=g), torch.randn(10, 2, generator=g) + torch.tensor([3.0, 0.0])])
    ytr = torch.cat([torch.zeros(40, dtype=torch.long), torch.ones(10, dtype=torch.long)])
    xte = torch.stack([torch.linspace(0.5, 3.5, 13), torch.zeros(13)], 1)  # across the boundary
    together = linear_probe_predict(xtr, ytr, xte, 2)
    assert 0 < int(together.sum()) < 13  # both classes predicted: the boundary lies among them
    alone = torch.stack([linear_probe_predict(xtr, ytr, xte[i : i + 1], 2)[0] for i in range(len(xte))])
    far = torch.tensor([[500.0, -300.0], [-800.0, 900.0]])  # test rows far away: statistics that
    with_outliers = linear_probe_predict(xtr, ytr, torch.cat([xte, far]), 2)[: len(xte)]  # saw them would move
    assert torch.equal(alone, together) and torch.equal(together, with_outliers)


def test_a_constant_training_feature_does_not_break_the_probe():
    xtr, ytr = _two_blobs(15, 4)
    xtr[:, 2] = 5.0  # zero spread: clamped, not a division by zero
    xte, yte = _two_blobs(15, 5)
    xte[:, 2] = 5.0
    acc = linear_probe(xtr, ytr, xte, yte)
    assert acc > 0.9  # not NaN (a NaN compares False), and the informative feature still separates the blobs


def test_a_feature_constant_in_training_has_no_say_at_test_time():
    """What training cannot fit cannot decide: a feature constant on every training tree, however
    far it moves on the test trees, leaves each prediction as the informative features make it."""
    xtr, ytr = _two_blobs(15, 6)
    xtr[:, 2] = 5.0
    xte, yte = _two_blobs(15, 7)
    plain = linear_probe_predict(xtr, ytr, xte, 2)
    moved = xte.clone()
    moved[:, 2] = torch.linspace(-1e4, 1e4, len(moved))  # varies only at test time
    assert torch.equal(linear_probe_predict(xtr, ytr, moved, 2), plain)
    assert float((plain == yte).float().mean()) > 0.9
