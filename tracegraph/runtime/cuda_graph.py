"""A whole training step (forward, backward, optimizer update) replayed as one CUDA graph.

A small model's step is a few hundred kernels of a few microseconds each; launched one by one from
Python, the GPU waits on the host. Captured once and replayed, the launches cost one call.

Rules the step function must follow (PyTorch's "whole network capture"): static shapes (pad
variable-sized data), tensors in and out only, no host syncs (``.item()``, ``float(t)``), its own
``optimizer.zero_grad(set_to_none=True)`` first (gradients are then allocated inside the graph and
overwritten at every replay), and an optimizer built with ``capturable=True``. Python scalars
read during capture — the learning rate — are frozen into the graph: :class:`GraphedStep`
re-captures when the ``key`` it is called with changes.
"""

from __future__ import annotations

from typing import Callable, Hashable

import torch

from tracegraph.runtime.progress import log


class GraphedStep:
    """A step function replayed as a CUDA graph after a few eager warm-up calls.

    Calling the object runs ``fn(*inputs)``: eagerly on a side stream for the first ``warmup``
    calls, then from a captured graph whose static inputs are refreshed in place. A new ``key``
    re-captures the graph; if capture fails, the step keeps running eagerly (logged once).

    Args:
        fn: The step; it must follow the capture rules in this module's description.
        warmup: Eager calls before the first capture.
    """

    def __init__(self, fn: Callable[..., torch.Tensor], warmup: int = 3):
        self.fn, self.warmup = fn, warmup
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.key: Hashable = None
        self.inputs: list[torch.Tensor] = []
        self.output: torch.Tensor | None = None
        self.failed = False

    def __call__(self, *inputs: torch.Tensor, key: Hashable = None) -> torch.Tensor:
        """Run one step: eagerly while warming up, else by replaying (or first capturing) the graph.

        Args:
            *inputs: The step's tensor inputs, with the same shapes at every call.
            key: Values read as Python scalars during capture (e.g. the learning rate); a new key
                re-captures the graph.

        Returns:
            The step's output tensor. After capture it is the graph's static output, overwritten by
            the next replay.
        """
        if self.failed or self.calls < self.warmup:
            # eager on a side stream first: lazily created state (optimizer moments, cuBLAS
            # workspaces, autograd's stream bookkeeping) must exist before capture
            self.calls += 1
            return self._side_stream(inputs)
        if self.graph is None or key != self.key:
            if not self._capture(inputs, key):
                return self._side_stream(inputs)
        else:
            for static, new in zip(self.inputs, inputs):
                static.copy_(new, non_blocking=True)
        self.graph.replay()
        return self.output

    def _side_stream(self, inputs) -> torch.Tensor:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out = self.fn(*inputs)
        torch.cuda.current_stream().wait_stream(stream)
        return out

    def _capture(self, inputs, key) -> bool:
        self.graph = None  # frees the previous graph's private memory pool
        self.inputs = [t.clone() for t in inputs]
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.output = self.fn(*self.inputs)
        except Exception as e:  # an op that cannot be captured: carry on eagerly, say so once
            self.failed = True
            log.warning(
                f"CUDA graph capture failed ({type(e).__name__}: {e}); training continues without "
                "graphs (--no-cuda-graphs silences this)"
            )
            return False
        self.graph, self.key = graph, key
        return True
