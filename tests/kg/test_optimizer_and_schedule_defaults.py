"""The optimizers' and schedules' defaults and wiring, against hand-computed updates and rates:
one Adam / Adagrad step in float64, each schedule's rate with its documented defaults, a
TrainConfig's settings reaching the schedule, and the exact wording of the refusals."""

import math

import pytest
import torch

from tests.kg.test_schedules_presets import naive_plateau
from tracegraph.errors import TracegraphError
from tracegraph.kg.model.schedules import LRSchedule, make_optimizer, make_schedule, resolve_patience
from tracegraph.kg.model.train import TrainConfig

CPU = torch.device("cpu")


def _one_step(opt_name, lr, **kw):
    """Parameter after one step from p0 = [1, -2] with loss g·p, g = [0.5, 3]."""
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, -2.0]]))
    opt = make_optimizer(model, lr, CPU, opt_name, **kw) if opt_name else make_optimizer(model, lr, CPU, **kw)
    (model.weight * torch.tensor([[0.5, 3.0]])).sum().backward()
    opt.step()
    return opt, model.weight.detach().double().flatten().tolist()


def _by_hand(lr, wd, eps):
    # first step of Adam (bias-corrected m̂ = g, v̂ = g²) and of Adagrad (sum = g²) alike:
    # p - lr * g / (|g| + eps), g the gradient plus the coupled L2 term wd * p
    out = []
    for p, g in ((1.0, 0.5), (-2.0, 3.0)):
        g += wd * p
        out.append(p - lr * g / (abs(g) + eps))
    return out


def test_default_optimizer_is_fused_adam_without_weight_decay():
    opt, p = _one_step(None, 0.1)
    assert isinstance(opt, torch.optim.Adam)
    g = opt.param_groups[0]
    assert g["weight_decay"] == 0.0 and g["capturable"] is False
    assert g["fused"] is True  # one-pass kernel on CPU
    assert p == pytest.approx(_by_hand(0.1, 0.0, 1e-8), rel=1e-6)


def test_adam_step_with_weight_decay_by_hand():
    # a first Adam step moves each weight by lr against the sign of its gradient: the L2 term
    # (2 * -2 = -4) turns the second weight's gradient 3 into -1, so it moves the other way
    opt, p = _one_step("adam", 0.05, weight_decay=2.0)
    assert p == pytest.approx(_by_hand(0.05, 2.0, 1e-8), rel=1e-6)
    assert p == pytest.approx([0.95, -1.95], rel=1e-6)


def test_adagrad_step_uses_the_given_rate():
    opt, p = _one_step("adagrad", 0.3, weight_decay=2.0)
    assert isinstance(opt, torch.optim.Adagrad)
    assert p == pytest.approx(_by_hand(0.3, 2.0, 1e-10), rel=1e-6)
    assert p == pytest.approx([0.7, -1.7], rel=1e-6)


def test_capturable_reaches_adam():
    model = torch.nn.Linear(2, 1)
    assert make_optimizer(model, 0.1, CPU, "adam", capturable=True).param_groups[0]["capturable"] is True


def _rates(sched, opt, n, mrrs=None):
    out = []
    for i in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()  # an epoch's steps come first (no gradients here: nothing moves)
        sched.after_epoch()
        if mrrs is not None:
            sched.after_evaluation(mrrs[i])
    return out


def _sgd():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)


def test_default_schedule_is_constant():
    opt = _sgd()
    assert _rates(LRSchedule(opt), opt, 4) == [1.0] * 4


def test_step_defaults_halve_the_rate_every_50_epochs():
    opt = _sgd()
    assert _rates(LRSchedule(opt, "step"), opt, 101)[::50] == pytest.approx([1.0, 0.5, 0.25])
    opt = _sgd()
    assert _rates(LRSchedule(opt, "step"), opt, 51)[49] == 1.0  # not before epoch 50
    opt = _sgd()
    assert _rates(LRSchedule(opt, "step", step_size=1, factor=0.5), opt, 3) == pytest.approx([1.0, 0.5, 0.25])


def test_cosine_with_the_default_single_epoch_reaches_min_lr_after_it():
    opt = _sgd()
    s = LRSchedule(opt, "cosine")
    opt.step()
    s.after_epoch()  # half a cosine over one epoch: 1 -> (1 + cos π) / 2 = 0
    assert opt.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)


def test_plateau_defaults_factor_half_patience_5_relative_threshold_1e_4():
    # a 1 % gain per evaluation is an improvement under a 1e-4 relative threshold; then flat
    mrrs = [0.3 * 1.01**i for i in range(8)] + [0.3 * 1.01**7] * 8
    opt = _sgd()
    got = _rates(LRSchedule(opt, "plateau"), opt, len(mrrs), mrrs)
    want = naive_plateau(mrrs, 0.5, 5, 1e-4)
    assert got == pytest.approx(want)
    assert want[:14] == [1.0] * 14 and want[14] == 0.5  # 6 flat evaluations (more than 5) lower it


def _cfg(**kw):
    return TrainConfig(train="t.txt", output_dir="o", **kw)


def test_train_config_settings_reach_the_schedule():
    opt = _sgd()
    assert _rates(make_schedule(opt, _cfg(lr_decay=0.9)), opt, 3) == pytest.approx([1.0, 0.9, 0.81])
    opt = _sgd()
    got = _rates(make_schedule(opt, _cfg(lr_scheduler="step", lr_step_size=2, lr_factor=0.25)), opt, 5)
    assert got == pytest.approx([1.0, 1.0, 0.25, 0.25, 0.0625])
    opt = _sgd()
    s = make_schedule(opt, _cfg(lr_scheduler="cosine", epochs=4, lr_min=0.2))
    assert _rates(s, opt, 4) == pytest.approx([0.2 + 0.8 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(4)])


def test_refusals_word_for_word():
    model = torch.nn.Linear(2, 1)
    with pytest.raises(TracegraphError) as e:
        make_optimizer(model, 0.1, CPU, "sgd")
    assert str(e.value) == "--optimizer must be one of adam, adagrad, not 'sgd'"
    with pytest.raises(TracegraphError) as e:
        resolve_patience(-1, True)
    assert str(e.value) == "--patience must be >= 0"
    with pytest.raises(TracegraphError) as e:
        LRSchedule(_sgd(), "linear")
    assert str(e.value) == "--lr-scheduler must be one of none, step, cosine, plateau, not 'linear'"
    with pytest.raises(TracegraphError) as e:
        LRSchedule(_sgd(), "step", lr_decay=0.9)
    assert str(e.value) == "--lr-decay is the 'none' schedule's per-epoch factor; use --lr-factor with --lr-scheduler"
