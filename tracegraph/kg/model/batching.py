"""Training batches built on the training device, from one index upload per epoch.

A ConvE step on a GPU takes well under a millisecond, so anything per batch on the host — a
DataLoader collating numpy arrays, pinning them, copying them over, reading the loss back — costs
more than the step itself. Here the samples and the CSR index of known tails live on the device;
per epoch the host draws the batch order (the same seeded generator as before, so order and resume
are unchanged) and uploads it once; a batch is then a slice of that upload plus a few gathers.

KvsAll targets have a data-dependent size (Σ of the batch's tail counts). The host knows every
count, so the exact size is passed in and no device→host sync is needed. For CUDA-graph replay the
shapes must be static: :meth:`EpochBatches.targets` then pads to a fixed ``capacity`` and returns
a 0/1 weight per target (padding rows have weight 0 and point at a valid entity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tracegraph.kg.model.loss import Targets
from tracegraph.kg.data.triples import KnownTails


@dataclass
class Batch:
    """One batch: ``index`` into the samples (host copy, for sizes) and its device slice."""

    number: int  # 0-based position in the epoch
    host_index: np.ndarray
    index: torch.Tensor  # on the device

    def __len__(self) -> int:
        return len(self.host_index)


class SampleStore:
    """Training samples and their known tails on ``device``.

    ``samples``: [n, 2] (h, r) pairs for KvsAll, whose targets are their tails in ``known``; or
    [n, 3] triples for 1vsAll (``known`` is None). ``keep`` (kg/data/exclusion.py) leaves samples out of
    their batches while every other sample keeps its place in the epoch's order.
    """

    def __init__(
        self, samples: np.ndarray, known: KnownTails | None, device: torch.device, keep: np.ndarray | None = None
    ):
        self.device = device
        self.kvsall = known is not None
        self.keep = keep
        self.samples = torch.as_tensor(np.ascontiguousarray(samples), dtype=torch.long, device=device)
        if self.kvsall:
            rows = known.key_rows(samples[:, 0], samples[:, 1])
            starts = np.where(rows >= 0, known.indptr[np.maximum(rows, 0)], 0)
            self.counts = np.where(
                rows >= 0, known.indptr[np.maximum(rows, 0) + 1] - starts, 0
            )  # host: sizes without a sync
            self.starts = torch.as_tensor(starts, dtype=torch.long, device=device)
            self.dev_counts = torch.as_tensor(self.counts, dtype=torch.long, device=device)
            self.tails = torch.as_tensor(known.tails, dtype=torch.long, device=device)
        else:
            self.counts = np.ones(len(samples), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.samples)

    def epoch(self, order: list[list[int]]) -> list[Batch]:
        """Upload an epoch's batch order once and slice it into batches.

        Samples that ``keep`` leaves out are removed from their batches (the others keep their places).

        Args:
            order: The epoch's batches, each a list of sample indices.

        Returns:
            One :class:`Batch` per entry of ``order``.
        """
        if self.keep is not None:
            order = [[i for i in b if self.keep[i]] for b in order]
        sizes = [len(b) for b in order]
        flat = np.fromiter((i for b in order for i in b), dtype=np.int64, count=sum(sizes))
        dev = torch.as_tensor(flat).to(self.device, non_blocking=True)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        return [Batch(k, flat[bounds[k] : bounds[k + 1]], dev[bounds[k] : bounds[k + 1]]) for k in range(len(order))]

    def target_count(self, batch: Batch) -> int:
        """The number of targets in a batch: its known tails (KvsAll) or its size (1vsAll).

        Args:
            batch: A batch of this store.

        Returns:
            The count, known on the host without a device sync.
        """
        return int(self.counts[batch.host_index].sum())

    def heads_relations(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The head and relation ids of the samples at ``index``.

        Args:
            index: Sample indices on the device, shape ``[B]``.

        Returns:
            Heads and relations, each shape ``[B]``.
        """
        s = self.samples[index]
        return s[:, 0], s[:, 1]

    def targets(self, index: torch.Tensor, size: int, padded: bool = False) -> Targets:
        """The batch's ``(row, true tail)`` pairs.

        Args:
            index: Sample indices on the device, shape ``[B]``.
            size: The exact number of targets (:meth:`target_count`), or with ``padded`` a capacity of
                at least that number.
            padded: Pad to ``size`` targets; the extra ones get weight 0 (static shapes for CUDA graphs).

        Returns:
            The targets; with ``padded`` their ``weight`` is 1 for real targets and 0 for padding.
        """
        B = index.shape[0]
        if not self.kvsall:
            return Targets(torch.arange(B, device=self.device), self.samples[index, 2])
        starts, counts = self.starts[index], self.dev_counts[index]
        ends = torch.cumsum(counts, 0)
        pos = torch.arange(size, device=self.device)
        if padded:
            row = torch.searchsorted(ends, pos, right=True)  # == B past the last real target
            valid = row < B
            row = row.clamp_(max=B - 1)
        else:
            row = torch.repeat_interleave(torch.arange(B, device=self.device), counts, output_size=size)
        at = starts[row] + pos - (ends[row] - counts[row])
        if padded:
            at = torch.where(valid, at, torch.zeros_like(at))
            return Targets(row, self.tails[at], weight=valid.to(torch.float32))
        return Targets(row, self.tails[at])
