"""What the plateau schedule's ``--lr-threshold`` means: a *relative* gain of valid MRR (higher is
better), worked by hand on MRRs where a relative and an absolute threshold disagree."""

import pytest
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.schedules import DEFAULT_PATIENCE, LRSchedule, resolve_patience


def _rates(mrrs, **kw):
    """The rate each evaluation's *next* epoch trains with, for a plateau schedule fed ``mrrs``."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    s = LRSchedule(opt, "plateau", **kw)
    out = []
    for m in mrrs:
        s.after_epoch()  # a no-op for plateau: only evaluations move it
        s.after_evaluation(m)
        out.append(opt.param_groups[0]["lr"])
    return out


def test_threshold_is_a_relative_gain_of_valid_mrr():
    # best 0.20; threshold 0.1 relative needs MRR > 0.22 to count as improvement.
    # 0.215 is +0.015 (7.5 %): no improvement, so with patience 0 the rate halves.
    assert _rates([0.20, 0.215], factor=0.5, patience=0, threshold=0.1) == pytest.approx([1.0, 0.5])
    # 0.23 is +0.03 (15 %): an improvement, the rate stays.
    assert _rates([0.20, 0.23], factor=0.5, patience=0, threshold=0.1) == pytest.approx([1.0, 1.0])
    # an absolute threshold of 0.1 would call both non-improvements; here MRR 0.20 -> 0.25 is
    # +25 %, an improvement by the relative rule (an absolute rule would need > 0.30)
    assert _rates([0.20, 0.25], factor=0.5, patience=0, threshold=0.1) == pytest.approx([1.0, 1.0])


def test_higher_mrr_is_better_and_a_drop_counts_against_patience():
    # falling MRRs are never improvements: patience 1 -> the second bad evaluation halves the rate
    assert _rates([0.5, 0.4, 0.3, 0.2], factor=0.5, patience=1, threshold=0.0) == pytest.approx([1, 1, 0.5, 0.5])
    # rising MRRs always are
    assert _rates([0.1, 0.2, 0.3, 0.4], factor=0.5, patience=0, threshold=0.0) == pytest.approx([1, 1, 1, 1])


def test_patience_counts_evaluations_more_than_patience_flat_ones_lower_the_rate():
    flat = [0.3] * 6
    # patience 2: evaluation 1 sets the best; 2, 3 flat (2 bad: not more than 2); 4 is the third -> halve;
    # the count restarts: 5, 6 bad (2) -> no further change
    assert _rates(flat, factor=0.5, patience=2, threshold=0.0) == pytest.approx([1, 1, 1, 0.5, 0.5, 0.5])


def test_min_lr_floors_the_plateau_rate():
    assert _rates([0.3] * 5, factor=0.1, patience=0, threshold=0.0, min_lr=0.05) == pytest.approx(
        [1.0, 0.1, 0.05, 0.05, 0.05]
    )


def test_plateau_ignores_epochs_and_other_schedules_ignore_evaluations():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    s = LRSchedule(opt, "plateau", factor=0.5, patience=0)
    for _ in range(5):
        s.after_epoch()
    assert opt.param_groups[0]["lr"] == 1.0
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    s2 = LRSchedule(opt2, "step", step_size=2, factor=0.5)
    for m in (0.5, 0.4, 0.3):
        s2.after_evaluation(m)
    assert opt2.param_groups[0]["lr"] == 1.0


def test_state_dict_round_trip_carries_the_plateau_count():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    s = LRSchedule(opt, "plateau", factor=0.5, patience=1, threshold=0.0)
    s.after_evaluation(0.3)
    s.after_evaluation(0.3)  # one bad evaluation so far
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    s2 = LRSchedule(opt2, "plateau", factor=0.5, patience=1, threshold=0.0)
    s2.load_state_dict(s.state_dict())
    s2.after_evaluation(0.3)  # the second bad one: more than patience 1 -> halve
    assert opt2.param_groups[0]["lr"] == pytest.approx(0.5)


def test_factor_bounds_and_patience_defaults():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    for bad in (0.0, 1.0, 1.5, -0.5):  # plateau: (0, 1), a one-line error, not torch's ValueError
        with pytest.raises(TracegraphError, match="--lr-factor"):
            LRSchedule(opt, "plateau", factor=bad)
    for bad in (0.0, 1.5):
        with pytest.raises(TracegraphError, match="--lr-factor"):
            LRSchedule(opt, "step", factor=bad)
    LRSchedule(opt, "step", factor=1.0)  # step: (0, 1], a constant rate is allowed
    LRSchedule(opt, "cosine", factor=5.0)  # only step and plateau read the factor
    assert DEFAULT_PATIENCE == 10  # LibKGE's default
    assert resolve_patience(None, True) == 10 and resolve_patience(None, False) == 0
    assert resolve_patience(0, True) == 0 and resolve_patience(3, False) == 3
    with pytest.raises(Exception, match="--patience"):
        resolve_patience(-1, True)
