"""``GraphedStep``'s control flow (runtime/cuda_graph.py) on a CPU, with torch.cuda's streams and
graphs replaced by recording stand-ins: the eager warm-up calls on a side stream that waits on the
current one (and is waited on), one capture on clones of the inputs followed by a replay, later calls
copying their inputs into the captured ones and replaying, a new key re-capturing, and a failed capture
logged once and left eager for good.

The stand-in graph does what a CUDA graph does with the recorded step: a replay recomputes the step's
operations on the tensors captured, writing into the captured output. Expected values are worked by
hand (the step is ``2·x + y``). The real graphs run in ``tests/gpu``.
"""

from contextlib import contextmanager

import pytest
import torch

from tests.conftest import log_lines
from tracegraph.runtime import cuda_graph
from tracegraph.runtime.cuda_graph import GraphedStep


class Stream:
    def __init__(self, events, name):
        self.events, self.name = events, name

    def wait_stream(self, other):
        self.events.append(("wait", self.name, other.name))


class Events(list):
    """The recorded events, and the graphs being captured (innermost last)."""

    capturing: list


class Graph:
    def __init__(self, events):
        self.events, self.ops = events, []
        events.append(("new graph",))

    def replay(self):
        self.events.append(("replay", self))
        for op in self.ops:
            op()


@pytest.fixture
def cuda(monkeypatch):
    """Recording stand-ins for torch.cuda's streams and graphs; yields the event list."""
    events = Events()
    capturing: list = []
    current = Stream(events, "current")
    made = []

    def new_stream():
        made.append(Stream(events, f"side{len(made)}"))
        return made[-1]

    @contextmanager
    def on_stream(s):
        events.append(("enter", s.name))
        yield
        events.append(("exit", s.name))

    @contextmanager
    def capture(graph):
        capturing.append(graph)
        events.append(("capture", graph))
        try:
            yield
        finally:
            capturing.pop()

    monkeypatch.setattr(torch.cuda, "Stream", new_stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: current)
    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: Graph(events))
    monkeypatch.setattr(torch.cuda, "graph", capture)
    events.capturing = capturing
    return events


def make_step(cuda, fail_captures=()):
    """``2·x + y``; calls recorded with the tensors received; recorded into a graph being captured;
    the captures numbered in ``fail_captures`` (from 1) raise."""
    calls = []

    def step(x, y):
        calls.append((x, y, bool(cuda.capturing)))
        if cuda.capturing and sum(c[2] for c in calls) in fail_captures:
            raise RuntimeError("operation not permitted when stream is capturing")
        out = 2 * x + y
        if cuda.capturing:
            cuda.capturing[-1].ops.append(lambda: out.copy_(2 * x + y))
        return out

    return step, calls


def test_the_first_calls_are_eager_on_a_side_stream_synchronised_both_ways(cuda):
    step, calls = make_step(cuda)
    g = GraphedStep(step, warmup=2)
    for i in range(2):
        x, y = torch.tensor([1.0, 2.0]) + i, torch.tensor([10.0, 20.0])
        out = g(x, y)
        assert calls[-1][0] is x and calls[-1][1] is y and not calls[-1][2]  # the caller's own tensors
        assert torch.equal(out, torch.tensor([12.0 + 2 * i, 24.0 + 2 * i]))
    side = [("wait", "side0", "current"), ("enter", "side0"), ("exit", "side0"), ("wait", "current", "side0")]
    assert cuda[:4] == side and cuda[4:] == [(e[0], *[n.replace("0", "1") for n in e[1:]]) for e in side]
    assert g.graph is None and g.calls == 2


def test_the_default_warm_up_is_three_eager_calls(cuda):
    step, calls = make_step(cuda)
    g = GraphedStep(step)
    for _ in range(4):
        g(torch.ones(1), torch.ones(1))
    assert [c[2] for c in calls] == [False, False, False, True]


def test_then_one_capture_on_copies_of_the_inputs_and_a_replay(cuda):
    step, calls = make_step(cuda)
    g = GraphedStep(step, warmup=1)
    g(torch.zeros(2), torch.zeros(2))
    cuda.clear()
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    out = g(x, y, key=0.1)
    (cx, cy, capturing) = calls[-1]
    assert capturing and cx is not x and cy is not y and torch.equal(cx, x) and torch.equal(cy, y)
    assert [e[0] for e in cuda] == ["new graph", "capture", "replay"]
    assert cuda[1][1] is cuda[2][1] is g.graph and g.key == 0.1
    assert out is g.output and torch.equal(out, torch.tensor([5.0, 8.0]))


def test_later_calls_copy_their_inputs_in_and_replay_without_calling_the_step(cuda):
    step, calls = make_step(cuda)
    g = GraphedStep(step, warmup=0)
    first = g(torch.tensor([1.0]), torch.tensor([1.0]), key="lr")
    n = len(calls)
    for v in (2.0, 7.0):
        x, y = torch.tensor([v]), torch.tensor([-1.0])
        out = g(x, y, key="lr")
        assert out is first  # the graph's static output, overwritten by each replay
        assert torch.equal(out, torch.tensor([2 * v - 1]))
        assert torch.equal(x, torch.tensor([v])) and torch.equal(y, torch.tensor([-1.0]))  # the caller's untouched
    assert len(calls) == n and [e[0] for e in cuda].count("new graph") == 1
    assert [e[0] for e in cuda].count("replay") == 3


def test_a_new_key_captures_again_and_a_key_of_none_is_a_key(cuda):
    step, calls = make_step(cuda)
    g = GraphedStep(step, warmup=0)
    g(torch.tensor([1.0]), torch.tensor([0.0]))  # key None
    g(torch.tensor([2.0]), torch.tensor([0.0]))  # None again: a replay
    assert [e[0] for e in cuda].count("new graph") == 1
    old = g.graph
    out = g(torch.tensor([3.0]), torch.tensor([1.0]), key=0.05)
    assert [e[0] for e in cuda].count("new graph") == 2 and g.graph is not old and g.key == 0.05
    assert [c[2] for c in calls] == [True, True] and torch.equal(out, torch.tensor([7.0]))
    assert torch.equal(g(torch.tensor([1.0]), torch.tensor([1.0]), key=0.05), torch.tensor([3.0]))
    assert [e[0] for e in cuda].count("new graph") == 2


def test_a_failed_capture_is_logged_once_and_the_step_stays_eager(cuda):
    step, calls = make_step(cuda, fail_captures={1})
    g = GraphedStep(step, warmup=1)
    with log_lines() as lines:
        outs = [g(torch.tensor([float(i)]), torch.tensor([1.0]), key=i) for i in range(5)]
    assert lines == [
        "CUDA graph capture failed (RuntimeError: operation not permitted when stream is capturing); "
        "training continues without graphs (--no-cuda-graphs silences this)"
    ]
    assert g.failed and g.graph is None
    assert [c[2] for c in calls] == [False, True, False, False, False, False]  # one capture tried, never again
    assert [float(o) for o in outs] == [1.0, 3.0, 5.0, 7.0, 9.0]  # every step ran, eagerly
    assert [e[0] for e in cuda].count("replay") == 0
    assert cuda_graph.log.name == "tracegraph"


def test_a_failed_capture_after_a_good_one_drops_the_old_graph(cuda):
    step, calls = make_step(cuda, fail_captures={2})
    g = GraphedStep(step, warmup=0)
    assert torch.equal(g(torch.tensor([1.0]), torch.tensor([0.0]), key=1), torch.tensor([2.0]))
    with log_lines() as lines:
        out = g(torch.tensor([4.0]), torch.tensor([0.0]), key=2)
    assert len(lines) == 1 and g.failed and g.graph is None  # its memory pool is not kept for nothing
    assert torch.equal(out, torch.tensor([8.0])) and not calls[-1][2]  # the step ran eagerly instead
