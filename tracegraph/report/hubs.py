"""Mechanism or degree: how many of a prediction's top proponents it shares through a hub.

An explanation can name training triples that say little about the prediction itself: when the
answer is one of the best-connected entities of the graph, "other drugs treat this disease" tops
the list whatever the drug. The report flags such lists with one rule:

* an entity's **degree** is the number of training triples it is the head or the tail of;
* a **hub** is an entity in the top decile by degree: at least the degree of the
  ⌈n / 10⌉-th best-connected of the n entities, and above the median degree (so a graph whose
  degrees are all alike has none);
* a proponent's **shared entity** is what it has in common with the prediction (head h, tail t):
  for a triple on a two-edge walk h–m–t (it joins m to h or to t, and m is a neighbour of the
  other end too), the middle entity m; else the one of h and t it touches (it joins another
  entity to h or t); a triple touching both (a direct edge) or neither has none;
* a proponent is a **hub triple** when its shared entity is a hub;
* the explanation is **mostly popularity** when at least half of the top proponents (those in
  the table) are hub triples.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

HUB_SHARE = 0.1  # the top decile by degree
MOSTLY = 0.5  # at least this share of the top proponents: mostly popularity


@dataclass
class HubGraph:
    """What the rule needs of the training graph.

    Attributes:
        degree: entity label -> the training triples it is the head or tail of.
        threshold: the smallest degree of a hub; None when the graph has none.
        neighbours: entity label -> its neighbours, for the entities asked for.
    """

    degree: dict[str, int]
    threshold: int | None
    neighbours: dict[str, set[str]] = field(default_factory=dict)

    def is_hub(self, entity: str) -> bool:
        """Whether the entity is a hub (top decile by degree)."""
        return self.threshold is not None and self.degree.get(entity, 0) >= self.threshold


def hub_threshold(degrees: Iterable[int]) -> int | None:
    """The smallest degree of a hub: that of the ⌈n / 10⌉-th best-connected entity, if above the median.

    Args:
        degrees: every entity's degree.

    Returns:
        The threshold, or None when no entity is above the median degree at that rank.
    """
    d = sorted(degrees, reverse=True)
    if not d:
        return None
    at = d[math.ceil(len(d) * HUB_SHARE) - 1]
    mid = len(d) // 2
    median = d[mid] if len(d) % 2 else (d[mid - 1] + d[mid]) / 2
    return at if at > median else None


def hub_graph(triples: Iterable[tuple[str, str, str]], focus: Iterable[str] = ()) -> HubGraph:
    """Degrees, the hub threshold, and the neighbours of the ``focus`` entities, from training triples.

    Args:
        triples: ``(head, relation, tail)`` labels of the training graph.
        focus: the entities whose neighbours are kept (the explained heads and tails).

    Returns:
        The :class:`HubGraph`.
    """
    focus = set(focus)
    degree: Counter = Counter()
    neighbours: dict[str, set[str]] = {f: set() for f in focus}
    for h, _, t in triples:
        degree[h] += 1
        if t != h:
            degree[t] += 1
        if h in focus:
            neighbours[h].add(t)
        if t in focus:
            neighbours[t].add(h)
    return HubGraph(dict(degree), hub_threshold(degree.values()), neighbours)


def shared_entity(triple: tuple[str, str, str], head: str, tail: str, graph: HubGraph) -> str | None:
    """A proponent's shared entity with the prediction (see the module's rule).

    Args:
        triple: the proponent, ``(head, relation, tail)`` labels.
        head: the prediction's head.
        tail: the prediction's tail.
        graph: the training graph (its ``neighbours`` must hold ``head`` and ``tail``).

    Returns:
        The entity, or None for a direct edge or a triple touching neither end.
    """
    a, _, b = triple
    ends = {a, b}
    if head in ends and tail in ends or not ({head, tail} & ends):
        return None
    end = head if head in ends else tail
    other_end = tail if end == head else head
    m = b if a == end else a
    return m if m in graph.neighbours.get(other_end, set()) else end


@dataclass
class Popularity:
    """The rule applied to one explained prediction's top proponents.

    Attributes:
        shared: per top proponent, its shared entity when that is a hub, else None.
        threshold: the smallest hub degree.
        head_hub: the degree of the prediction's head when it is a hub, else None.
        tail_hub: the same for its tail.
    """

    shared: list[str | None]
    threshold: int
    head_hub: int | None = None
    tail_hub: int | None = None

    @property
    def hub_triples(self) -> int:
        """How many of the top proponents are hub triples."""
        return sum(s is not None for s in self.shared)

    @property
    def mostly(self) -> bool:
        """Whether at least half of the top proponents are hub triples."""
        return bool(self.shared) and self.hub_triples >= MOSTLY * len(self.shared)


def popularity(proponents: list[tuple[str, str, str]], head: str, tail: str, graph: HubGraph | None):
    """The rule on a prediction's top proponents.

    Args:
        proponents: the proponents in the table, in its order.
        head: the prediction's head.
        tail: the prediction's tail.
        graph: the training graph, or None when it could not be read.

    Returns:
        A :class:`Popularity`, or None without a graph, a hub, or a proponent.
    """
    if graph is None or graph.threshold is None or not proponents:
        return None
    shared = [shared_entity(p, head, tail, graph) for p in proponents]
    deg = {x: graph.degree.get(x, 0) if graph.is_hub(x) else None for x in (head, tail)}
    return Popularity(
        [s if s is not None and graph.is_hub(s) else None for s in shared], graph.threshold, deg[head], deg[tail]
    )


__all__ = ["HubGraph", "Popularity", "hub_graph", "hub_threshold", "popularity", "shared_entity"]
