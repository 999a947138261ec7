"""Explanation methods behind one ``--method``: sort keys for each fact's candidate training triples.

* ``tracin``: Σ_k η_k ⟨∇ℓ_k(train), ∇ℓ_k(fact)⟩ (docs/design.md, "Exact TracIn"), with any loss convention
  (default ``logit``, ℓ = −s: what a KvsAll retrain without the triple changes; tracin/factors.py);
* ``tracin-cosine``: Σ_k η_k cos(∇ℓ_k(train), ∇ℓ_k(fact)) — the gradients' lengths out of it, so
  a "generic" training triple with a large gradient (one the model fits badly, whose gradient
  points everywhere) no longer tops every list;
* ``relatif``: TracIn / sqrt(self-influence of the training triple), the ℓ-relative influence of
  RelatIF (Barshan et al. 2020) with TracIn's self-influence Σ_k η_k ‖∇ℓ_k(train)‖² in place of
  the inverse-Hessian norm: the projection of the training gradient on the fact's;
* ``tracin-margin``: TracIn of the fact's *margin* over its strongest competitor, s(h,r,t) −
  s(h,r,t*), t* the best-scored tail the final model does not know to be true (filtered). TracIn
  is linear in the test gradient, so this is TracIn(h,r,t) − TracIn(h,r,t*): the training triples
  that lift the fact *and not* its rival — what a rank-1 prediction needs (H@1 is about the
  margin, not the score);
* ``tracin-path``: TracIn inside path-length shells — candidates on a shorter head–tail path
  (through the candidate graph, as the ``path`` baseline measures it) first, TracIn orders each
  shell. The filter's path option (docs/filtering.md) ranked by TracIn, at every path length at
  once: a prediction rests on the walks that join its head to its tail, and TracIn says which of
  the edges at the same distance the model used;
* ``tracin-margin-path``: the margin inside path shells — candidates on a shorter head–tail walk
  first, the margin orders each shell, and a direct head–tail edge (a one-edge walk, parallel to
  the fact) counts with the two-edge walks. The margin ranks what the rank-1 prediction rests on;
  the shells put the walks that join head and tail first, so a mechanism's middle edges, which
  touch neither end, are not buried under the head's other triples. Forcing direct edges first
  cost necessity on UMLS (docs/explaining.md, "How to choose"), so they share the first shell;
* ``tracin-margin-query``: the fact's own query first — the training facts (h, r, t′) that answer
  (h, r, ?) with another tail (on the head side (h′, r, t)) — then the margin orders each group.
  A 1-N model trains a query as one sample labelled with its answers, so these are the labels of
  the very sample the prediction is read from; removing all of them removes the sample, a step
  that first-order influence, which sees one label at a time, does not rank first;
* ``local-retrain``: re-fit the head's (and tail's) embedding without candidate subsets and keep
  the subset whose removal costs the prediction most (kg/explain/local_retrain.py);
* ``local-newton``: the same search with each re-fit replaced by one damped Newton step from the
  trained embedding (kg/explain/local_newton.py): one gradient per set instead of Adam steps;
* ``degree``, ``path``, ``random``: the baselines of the recovery check (kg/explain/fidelity.py).

Every method returns, per fact, a list of key arrays aligned with the fact's candidates: sorted
descending, the first most significant (ties broken at random by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tracegraph.errors import TracegraphError
from tracegraph.kg.explain.local_newton import LocalNewton
from tracegraph.kg.explain.local_retrain import LocalRefit, LocalRetrainOptions
from tracegraph.kg.explain.ranking import (  # noqa: F401  (margin_shell: methods.margin_shell stays importable)
    degrees,
    margin_shell,
    same_query,
    method_keys,
    path_lengths,
    path_shell,
    ranked_order,
)
from tracegraph.kg.explain.rivals import competitors
from tracegraph.kg.explain.influence_parts import InfluenceParts, influence_parts
from tracegraph.kg.explain.tracin.engine import DEFAULT_LOSS


@dataclass
class MethodInputs:
    """What a method's keys are computed from, per fact j (aligned with its candidates ``subsets[j]``)."""

    parts: "InfluenceParts | None"  # TracIn, cosine, RelatIF of the fact
    margins: list | None  # TracIn(fact) − TracIn(rival)
    walks: Callable[[int], np.ndarray]  # head–tail walk length of each candidate
    baselines: Callable[[int], dict]  # degree / path / random keys
    answers: Callable[[int], np.ndarray] | None = None  # which candidates answer the fact's own query


@dataclass(frozen=True)
class Method:
    """An explanation method: its name, what it needs, and how it computes a fact's sort keys.

    :meth:`order` turns the keys into one score per candidate.

    Attributes:
        name: the ``--method`` name.
        keys: ``keys(inputs, j)``, fact j's sort keys (descending, the first most significant).
        needs_influence: needs the influence-based scores (:class:`InfluenceParts`).
        needs_rival: the margin over the fact's rival (the rival rides along the engine pass).
        walk_shells: explain lists rows by head–tail walk shell first (HeadTailWalk column).
        in_pass: computed by explain's engine pass itself (so it runs under torchrun and on several devices).
        signed: its score's sign says for or against (proponents and opponents).
    """

    name: str
    keys: Callable[[MethodInputs, int], list]
    needs_influence: bool = True
    needs_rival: bool = False
    walk_shells: bool = False
    in_pass: bool = False
    signed: bool = True

    def order(self, inputs: MethodInputs, j: int) -> np.ndarray:
        """Fact j's keys as one score per candidate, larger first (see :func:`single_score`).

        Args:
            inputs: what the keys are computed from.
            j: the fact's position.

        Returns:
            One float64 score per candidate of fact j.
        """
        return single_score(self.keys(inputs, j), seed=j)


def _influence(attr: str):
    return lambda x, j: [getattr(x.parts, attr)[j]]


def _margin(x: MethodInputs, j: int) -> list:
    return [x.margins[j]]


def _tracin(x: MethodInputs, j: int) -> list:
    return [np.asarray(x.parts.tracin[j], np.float64)]


def walk_shells_over(base, shell):
    """Compose keys: candidates in a smaller walk shell first, then ``base``'s keys inside each shell.

    Args:
        base: ``base(inputs, j) -> keys``, the keys that order each shell.
        shell: ``shell(walk lengths) -> shells``, smaller first (e.g. :func:`path_shell`).

    Returns:
        ``keys(inputs, j)``: ``[-shell(walks), *base keys]``.
    """
    return lambda x, j: [-shell(x.walks(j)), *base(x, j)]


def answers_first_over(base):
    """Compose keys: candidates answering the fact's own query first, then ``base``'s keys in each group.

    Args:
        base: ``base(inputs, j) -> keys``.

    Returns:
        ``keys(inputs, j)``: ``[answers(j), *base keys]``.
    """
    return lambda x, j: [x.answers(j).astype(np.float64), *base(x, j)]


def _baseline(name: str):
    return lambda x, j: x.baselines(j)[name]


INFLUENCE_METHODS = ("tracin", "tracin-cosine", "relatif")
BASELINE_METHODS = ("degree", "path", "random")
MARGIN_METHODS = (
    "tracin-margin",
    "tracin-margin-path",
    "tracin-margin-query",
)  # the rival rides along as an extra test triple
# explain's, fidelity necessity's and the demo's default: chosen by necessity and recovery (docs/explaining.md,
# "How to choose"); the CLI repeats it as a literal (tests/kg/test_necessity.py checks)
DEFAULT_EXPLAINER = "tracin-margin-path"
# the one table of methods: the CLI's --method choices, explain, fidelity and the demo read it
REGISTRY: dict[str, Method] = {
    m.name: m
    for m in (
        Method("tracin", _influence("tracin"), in_pass=True),
        Method("tracin-cosine", _influence("cosine")),
        Method("relatif", _influence("relatif")),
        Method("tracin-margin", _margin, needs_rival=True, in_pass=True),
        Method(
            "tracin-margin-path",
            walk_shells_over(_margin, lambda w: margin_shell(w)),
            needs_rival=True,
            walk_shells=True,
            in_pass=True,
        ),
        Method("tracin-path", walk_shells_over(_tracin, lambda w: path_shell(w)), signed=False),
        Method("tracin-margin-query", answers_first_over(_margin), needs_rival=True, signed=False),
        Method("local-retrain", lambda x, j: [], signed=True),  # keys from LocalRefit, see method_keys_all
        Method("local-newton", lambda x, j: [], signed=True),  # keys from LocalNewton
        *(Method(b, _baseline(b), needs_influence=False, signed=False) for b in BASELINE_METHODS),
    )
}
METHODS = tuple(REGISTRY)
# the methods that search removal sets by re-fitting the fact's entities (TracIn pre-ranks their candidates)
LOCAL_SEARCHES = {"local-retrain": LocalRefit, "local-newton": LocalNewton}
# the original research scripts ranked by plain TracIn over the 1-N training loss; `--loss train-loss`
# alone brings that back (one flag away), so with it the method left unnamed is plain tracin
EARLIER_CONVENTION = ("tracin", "train-loss")


def get_method(name: str) -> Method:
    """The registered method called ``name``.

    Args:
        name: a method name (:data:`METHODS`).

    Returns:
        The :class:`Method`.

    Raises:
        TracegraphError: no such method (the message lists them).
    """
    if name not in REGISTRY:
        raise TracegraphError(f"method must be one of {', '.join(METHODS)}, not {name!r}")
    return REGISTRY[name]


def default_method(loss: str) -> str:
    """The method ``explain`` uses when none is named.

    Args:
        loss: the loss convention asked for.

    Returns:
        ``tracin`` (the original research scripts' plain TracIn) for ``train-loss``, else
        :data:`DEFAULT_EXPLAINER`.
    """
    return EARLIER_CONVENTION[0] if loss == EARLIER_CONVENTION[1] else DEFAULT_EXPLAINER


@dataclass
class MethodOptions:
    """Settings shared by the explanation methods.

    Attributes:
        loss: the TracIn loss convention (tracin*, relatif, and local-retrain's pre-ranking).
        layers: the parameters whose gradients count: ``all``, ``last:N`` or names.
        label_smoothing: the label smoothing of the ``train-loss`` convention, and local-retrain's refits.
        local: local-retrain's settings.
    """

    loss: str = DEFAULT_LOSS  # the TracIn loss convention (tracin*, relatif, local-retrain's pre-ranking)
    layers: str = "all"
    label_smoothing: float = 0.1
    local: LocalRetrainOptions = field(default_factory=LocalRetrainOptions)


def check_methods(methods) -> list[str]:
    """The methods asked for, duplicates dropped, in order.

    Args:
        methods: method names.

    Returns:
        The names, each once.

    Raises:
        TracegraphError: an unknown name, or no name.
    """
    out = list(dict.fromkeys(methods))
    bad = [m for m in out if m not in METHODS]
    if bad or not out:
        raise TracegraphError(f"--method must be among {', '.join(METHODS)}, not {', '.join(bad) or 'nothing'}")
    return out


def fact_rows(train_ids: np.ndarray, fact) -> np.ndarray:
    """Training rows equal to the fact (h, r, t): never explanations.

    Args:
        train_ids: ``[M, 3]`` training triples as ids.
        fact: the fact ``(h, r, t)`` as ids.

    Returns:
        The matching row positions.
    """
    h, r, t = (int(x) for x in fact)
    return np.flatnonzero(((train_ids[:, 0] == h) & (train_ids[:, 1] == r) & (train_ids[:, 2] == t)))


def method_keys_all(
    methods: list[str],
    *,
    model,
    checkpoints,
    train_ids: np.ndarray,
    facts: np.ndarray,
    subsets: list[np.ndarray],
    known,
    opts: MethodOptions,
    device,
    progress=None,
    head_side=None,
) -> dict:
    """Method -> per fact, the list of key arrays for its candidates (see the module doc).

    ``facts`` are base-relation triples (h, r, t), predicted on the tail side unless ``head_side``
    marks them (reciprocal models). Only the margin methods' rival depends on the side: TracIn of
    a reciprocal model's triple already sums both of its directions. Candidates equal to the fact
    never reach the top (they get -inf).

    Args:
        methods: the method names (duplicates dropped).
        model: the final ConvE model (rivals, local-retrain's refits).
        checkpoints: the checkpoint files TracIn sums over.
        train_ids: ``[M, 3]`` training triples as ids.
        facts: ``[T, 3]`` facts as ids.
        subsets: per fact, its candidate rows of ``train_ids``.
        known: the filter index for the rivals and local-retrain; None: only the fact's answer is left out.
        opts: the methods' settings.
        device: where the methods compute.
        progress: a progress display to report to; None: silent.
        head_side: ``[T]`` booleans, true for a head-side fact; None: all tail side.

    Returns:
        Method name -> per fact, its list of key arrays (descending, the first most significant);
        with local-retrain also ``"_local_retrain_records"``, the searches' records.

    Raises:
        TracegraphError: an unknown method name, or influence needed and no fact has a candidate.
    """
    methods = check_methods(methods)
    out: dict[str, list] = {}
    need_influence = any(REGISTRY[m].needs_influence for m in methods)
    parts = margins = None
    if any(REGISTRY[m].needs_rival for m in methods):  # the rivals ride along as extra test triples of the same pass
        T = len(facts)
        both = influence_parts(
            checkpoints,
            train_ids,
            np.concatenate([facts, competitors(model, facts, known, head_side)]),
            list(subsets) * 2,
            opts,
            device,
            progress,
        )
        parts = InfluenceParts(both.tracin[:T], both.cosine[:T], both.relatif[:T])
        margins = [np.asarray(a, np.float64) - np.asarray(b, np.float64) for a, b in zip(parts.tracin, both.tracin[T:])]
    elif need_influence:
        parts = influence_parts(checkpoints, train_ids, facts, subsets, opts, device, progress)
    deg = degrees(train_ids, model.config.num_entities)
    walk_cache: dict[int, np.ndarray] = {}  # tracin-path and tracin-margin-path share each fact's walks

    def walks(j: int) -> np.ndarray:
        if j not in walk_cache:
            walk_cache[j] = path_lengths(train_ids[subsets[j]][:, [0, 2]], int(facts[j][0]), int(facts[j][2]))
        return walk_cache[j]

    sides = np.zeros(len(facts), bool) if head_side is None else np.asarray(head_side, bool)
    inputs = MethodInputs(
        parts,
        margins,
        walks,
        lambda j: method_keys(
            np.zeros(len(subsets[j])), train_ids[subsets[j]], int(facts[j][0]), int(facts[j][2]), deg
        ),
        lambda j: same_query(train_ids[subsets[j]], facts[j], bool(sides[j])),
    )
    for m in methods:
        if m not in LOCAL_SEARCHES:
            out[m] = [REGISTRY[m].keys(inputs, j) for j in range(len(facts))]
    for m in (m for m in methods if m in LOCAL_SEARCHES):
        search = LOCAL_SEARCHES[m](model, train_ids, known, opts.label_smoothing, opts.local, device)
        keys, records = [], []
        for f, rows, pre in zip(facts, subsets, parts.tracin):
            k, rec = search.explain(tuple(int(x) for x in f), rows, pre, fact_rows(train_ids, f))
            keys.append([k])
            records.append(rec)
        out[m] = keys
        if m == "local-retrain":
            out["_local_retrain_records"] = records
    for m, per in out.items():  # a fact never explains itself
        if m.startswith("_"):
            continue
        for f, rows, ks in zip(facts, subsets, per):
            bad = np.isin(rows, fact_rows(train_ids, f))
            if bad.any():
                ks[0] = np.where(bad, -np.inf, np.asarray(ks[0], np.float64))
    return out


def single_score(keys: list[np.ndarray], seed: int = 0) -> np.ndarray:
    """One score per candidate with the same order as the keys, larger first.

    A single key that is not all zero is the score itself; otherwise (several keys, or the
    ``random`` baseline's all-zero key) the score is minus the rank position, ties broken at random.

    Args:
        keys: the key arrays (descending, the first most significant), one value per candidate each.
        seed: the seed of the random tie-break.

    Returns:
        One float64 score per candidate.
    """
    if len(keys) == 1 and np.any(np.asarray(keys[0]) != 0):
        return np.asarray(keys[0], np.float64)
    order = ranked_order(keys, np.random.default_rng(seed).permutation(len(keys[0])))
    out = np.empty(len(order))
    out[order] = -np.arange(1, len(order) + 1, dtype=np.float64)
    return out
