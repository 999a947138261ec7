"""What ``explain`` returns per test triple: the listing's rows (proponents, then opponents) and its record.

A row is the researchers' CSV header's values (:data:`CSV_HEADER`), then ``MethodScore`` for
methods other than tracin, ``HeadTailWalk`` for tracin-margin-path, and last the ``Role``.
The *ordering score* is ``MethodScore`` when present, else ``TracInScore``. Proponents are rows
with a positive ordering score in the method's order; opponents are rows with a negative one,
the most negative first. A top-k listing holds at most k of each and never fills the opponents
with weak proponents: when fewer than k rows are negative, fewer opponents are listed (and the
record says so).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from tracegraph.kg.data.idmap import read_name_dict
from tracegraph.kg.data.labels import read_edge_map
from tracegraph.kg.explain.ranking import margin_shell
from tracegraph.runtime.progress import log

CSV_HEADER = [
    "TestHead",
    "TestHead_label",
    "TestRel",
    "TestRel_label",
    "TestTail",
    "TestTail_label",
    "TrainHead",
    "TrainHead_label",
    "TrainRel",
    "TrainRel_label",
    "TrainTail",
    "TrainTail_label",
    "TracInScore",
    "SelfInfluence",
]
# after CSV_HEADER: methods other than tracin add MethodScore (rows sorted by it); tracin-margin-path
# also HeadTailWalk, the shortest head–tail walk through the triple (rows sorted by shell, then score)
EXTRA_COLUMNS = ["MethodScore", "HeadTailWalk"]
ROLE_COLUMN = "Role"
PROPONENT, OPPONENT = "proponent", "opponent"


@dataclass
class Explanation:
    """One explained test triple: its file stem, its record and its listed rows.

    Attributes:
        name: the file stem, ``triple_NNN_<head>_<tail>``.
        meta: the companion JSON's record (without the rows).
        rows: a DataFrame with the CSV's columns (``Role`` last): proponents, then opponents.
    """

    name: str  # the file stem, triple_NNN_<head>_<tail>
    meta: dict
    rows: pd.DataFrame = field(repr=False)

    @property
    def proponents(self) -> pd.DataFrame:
        """The rows whose ``Role`` is proponent, in listing order."""
        return self.rows[self.rows[ROLE_COLUMN] == PROPONENT]

    @property
    def opponents(self) -> pd.DataFrame:
        """The rows whose ``Role`` is opponent, most negative first."""
        return self.rows[self.rows[ROLE_COLUMN] == OPPONENT]


@dataclass
class ExplainResult:
    """``run_explain``'s records: one :class:`Explanation` per explained test triple, and the summary."""

    explanations: list[Explanation]
    summary: dict

    def frame(self) -> pd.DataFrame:
        """Every explanation's rows, the test triples one after the other."""
        frames = [e.rows for e in self.explanations]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*CSV_HEADER, ROLE_COLUMN])


def pick(score: np.ndarray, walk: np.ndarray | None, top_k: int | None, signed: bool = True):
    """The rows listed, in order, and their roles.

    Without ``top_k``: every row in the method's order (by score descending; with ``walk``,
    tracin-margin-path's, by margin shell first), negative ones marked opponents. With ``top_k``:
    the first k rows of that order with a positive score, then the k most negative (ascending).
    ``signed=False`` (a method whose score is a rank, not an influence): proponents only. Stable,
    so equal scores keep their column order, and a torchrun rank's own picks contain every global
    pick in its shard.

    Args:
        score: each row's ordering score (MethodScore if the method has one, else TracInScore).
        walk: each row's head–tail walk length (tracin-margin-path), ordered by its margin shell
            first; None: by score alone.
        top_k: proponents and opponents kept each; None: every row.
        signed: False: every kept row is a proponent, the first ``top_k`` of the order.

    Returns:
        ``(order, roles)``: row positions and a list of "proponent" / "opponent".
    """
    s = np.asarray(score, np.float64)
    by_score = np.argsort(-s, kind="stable")
    order = by_score if walk is None else np.lexsort((-s, margin_shell(walk)))
    if top_k is None:
        roles = [OPPONENT if signed and s[i] < 0 else PROPONENT for i in order]
        return order, roles
    if not signed:
        pro, opp = order[:top_k], np.zeros(0, np.int64)
    else:
        pro = order[s[order] > 0][:top_k]
        ascending = np.argsort(s, kind="stable")
        opp = ascending[np.isfinite(s[ascending]) & (s[ascending] < 0)][:top_k]
    return np.concatenate([pro, opp]).astype(np.int64), [PROPONENT] * len(pro) + [OPPONENT] * len(opp)


def _pick(score, walk, top_k):
    """The positions :func:`pick` lists (what a torchrun rank keeps of its shard)."""
    return pick(score, walk, top_k)[0]


def _rows(
    scores,
    self_inf,
    train_rows,
    test,
    top_k,
    ent_labels,
    rel_labels,
    ent_names,
    rel_names,
    method=None,
    walk=None,
    signed=True,
):
    """CSV rows ordered by ``method``'s scores when given, else TracIn's; the Role last.

    With ``method`` a MethodScore column follows SelfInfluence; with ``walk`` rows are ordered by
    its shell first and a HeadTailWalk column follows.
    """
    order, roles = pick(scores if method is None else method, walk, top_k, signed)
    h, r, t = test
    head = [ent_labels[h], ent_names[h], rel_labels[r], rel_names[r], ent_labels[t], ent_names[t]]
    out = []
    for k, role in zip(order, roles):
        th, tr, tt = train_rows[k]
        out.append(
            head
            + [
                ent_labels[th],
                ent_names[th],
                rel_labels[tr],
                rel_names[tr],
                ent_labels[tt],
                ent_names[tt],
                float(scores[k]),
                float(self_inf[k]),
            ]
            + ([] if method is None else [float(method[k])])
            + ([] if walk is None else [float(walk[k])])
            + [role]
        )
    return out


def header_of(rows) -> list[str]:
    """The CSV header of rows built by :func:`_rows`.

    Args:
        rows: the row lists; their length says which extra columns they carry.

    Returns:
        :data:`CSV_HEADER`, then ``MethodScore`` and ``HeadTailWalk`` as the rows carry them, then ``Role``.
    """
    n_extra = (len(rows[0]) - 1 - len(CSV_HEADER)) if rows else 0
    return [*CSV_HEADER, *EXTRA_COLUMNS[:n_extra], ROLE_COLUMN]


def rival_records(rivals: np.ndarray, s_fact, s_rival, ent_labels, ent_names, side: str) -> list[dict]:
    """Per test triple, the record of its margin methods' rival: the rival, both logits and the margin.

    On the tail side the rival of (h, r, t) is t*, the best-scored tail neither t nor known true,
    and the margin is s(h, r, t) − s(h, r, t*); on the head side it is h*, with the logits of
    (t, r⁻¹, h) and (t, r⁻¹, h*).

    Args:
        rivals: ``[T, 3]`` rival triples as ids, (h, r, t*) or (h*, r, t).
        s_fact: ``[T]`` each test triple's logit on its side.
        s_rival: ``[T]`` each rival's logit on that side.
        ent_labels: entity labels by id.
        ent_names: entity display names by id.
        side: ``"tail"`` or ``"head"``, the side of every test triple.

    Returns:
        One dict per test triple: ``side``, the rival's label (under the key ``side``) and name,
        ``logit`` (the rival's), ``fact_logit`` and ``logit_margin``.
    """
    col = 0 if side == "head" else 2
    return [
        {
            "side": side,
            side: ent_labels[int(x[col])],
            f"{side}_name": ent_names[int(x[col])],
            "logit": float(b),
            "fact_logit": float(a),
            "logit_margin": float(a - b),
        }
        for x, a, b in zip(rivals, s_fact, s_rival)
    ]


def _names(path, labels: list[str]) -> list[str]:
    if not path:
        return list(labels)
    names = read_name_dict(path)
    return [names.get(i, lab) for i, lab in enumerate(labels)]


def _rel_names(path, labels: list[str]) -> list[str]:
    if not path:
        return list(labels)
    emap = read_edge_map(path)
    return [emap.get(lab, lab) for lab in labels]


def explanation_meta(cfg, store, eps: float, parts, j: int, i: int, triple, ranked: int, rows) -> dict:
    """One explained test triple's record (its companion JSON without the rows).

    Args:
        cfg: the explain settings (method, side, engine, loss, top_k).
        store: the run (its labels).
        eps: the label smoothing of the loss.
        parts: the influence stage's result, ranks, scores and rivals.
        j: the test triple's row among those explained.
        i: its position among the questions.
        triple: its ``(h, r, t)`` ids.
        ranked: how many training triples it ranked.
        rows: its listing (for the opponents' note).

    Returns:
        The record.
    """
    h, r, t = triple
    ents, res = store.entities.labels, parts.result
    meta = {
        "test_triple": {
            "index": i,
            "head": ents[h],
            "relation": store.relations.labels[r],
            "tail": ents[t],
            "rank": float(parts.ranks[j]),
            "score": float(parts.scores[j]),
        },
        "method": cfg.method,
        "side": cfg.side,
        "engine": cfg.engine,
        "loss": cfg.loss,
        "label_smoothing": eps,
        "layers": res.layers,
        "checkpoints": [asdict(c) for c in res.checkpoints],
        "learning_rates": [c.lr for c in res.checkpoints],
        "test_self_influence": float(res.test_self[j]),
        "training_triples_ranked": int(ranked),
        "top_k": cfg.top_k,
    }
    if parts.rivals is not None:  # what the margin is taken against: without it the ranking cannot be read
        meta["rival"] = parts.rivals[j]
    n_opp = sum(row[-1] == "opponent" for row in rows)
    if cfg.top_k is not None and n_opp < cfg.top_k:
        meta["opponents_note"] = (
            f"{n_opp} opponent(s) of the {cfg.top_k} asked: only {n_opp} candidate(s) have a "
            f"negative score; opponents are never filled with weak proponents"
        )
        log.info(f"test triple {i}: {meta['opponents_note']}")
    return meta


def run_summary(cfg, sel, inputs, parts, explanations, ctx, devices, device, seconds: float) -> dict:
    """``summary.json``: what was asked, explained, set aside or failed, the settings, one entry per triple.

    Args:
        cfg: the explain settings.
        sel: the selection (explained, skipped, failed and unresolved questions).
        inputs: the training triples and checkpoints.
        parts: the influence stage's result (None when nothing was explained).
        explanations: the records, in order.
        ctx: the distributed context.
        devices: the devices of a multi-device run, or None.
        device: the device.
        seconds: the time taken.

    Returns:
        The summary.
    """
    summary = {
        "requested": sel.requested,
        "explained": len(sel.todo),
        "skipped_existing": len(sel.skipped),
        "failed": len(sel.failures),
        "failures": sel.failures,
        "unresolved": sel.unresolved,
        "elapsed_seconds": seconds,
        "files": [f"{e.name}_tracin.{x}" for e in explanations for x in ("csv", "json")],
        "method": cfg.method,
        "engine": cfg.engine,
        "loss": cfg.loss,
        "layers": parts.result.layers if parts else cfg.layers,
        "checkpoints": [str(c) for c in inputs.checkpoints],
        "training_triples": int(len(inputs.train_ids)),
        "union_of_ranked_training_triples": int(len(sel.union)),
        "device": str(device),
        "side": cfg.side,
        "top_k": cfg.top_k,
        "triples": [
            {
                **{k: e.meta["test_triple"][k] for k in ("index", "head", "relation", "tail", "rank", "score")},
                "rival": e.meta.get("rival"),
                "csv": f"{e.name}_tracin.csv",
                "json": f"{e.name}_tracin.json",
            }
            for e in explanations
        ],
    }
    if ctx.active:
        summary["world_size"] = ctx.world_size
    if devices:
        summary["devices"] = [str(d) for d in devices]
    return summary


__all__ = [
    "CSV_HEADER",
    "EXTRA_COLUMNS",
    "ROLE_COLUMN",
    "Explanation",
    "ExplainResult",
    "pick",
    "header_of",
    "rival_records",
    "explanation_meta",
    "run_summary",
]
