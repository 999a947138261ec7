"""Two arms of the side-by-side protocol, fact by fact: where they remove the same facts, as many, or the same key fact.

A difference between two arms' ΔH@1 mixes three things: what the explanations chose, how much
they removed, and the retrain's chaos. These counts pull them apart: on the facts both explain
with the same removal set the difference is the chaos; on the facts whose explanations are the
same size it is the choice (and the chaos), not the size; on the facts where only one
explanation holds a training fact joining head and tail, it is that one fact.
"""

from __future__ import annotations

import numpy as np


def same_explanations(removed: dict[str, list], records: dict[str, dict]) -> list[dict]:
    """Per pair of finished arms: the facts both remove the same set for, and where those fell.

    Where two arms remove the same training facts for a prediction, a difference in its outcome
    comes from the rest of the retrain (the other predictions' removals, the trajectory's chaos),
    not from its explanation: how often that happens bounds what a per-fact comparison of the
    two arms can credit to the explanations.

    Args:
        removed: Arm name -> per graded fact, the training rows the arm removes (explanation arms).
        records: Arm name -> its finished record (``arms/NAME.json``).

    Returns:
        One entry per pair with at least one such fact, in ``removed``'s order: ``arms`` (the
        pair), ``facts``, and under the original filter ``fell_in_both`` and ``fell_only_in``
        (arm name -> count).
    """
    names = [n for n in removed if n in records]
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            same = [
                j
                for j, (x, y) in enumerate(zip(removed[a], removed[b], strict=True))
                if len(x) and np.array_equal(np.sort(np.asarray(x)), np.sort(np.asarray(y)))
            ]
            if not same:
                continue
            fa, fb = (np.asarray(records[n]["ranks"]["original"], np.float64)[same] > 1 for n in (a, b))
            out.append(
                {
                    "arms": [a, b],
                    "facts": len(same),
                    "fell_in_both": int(np.sum(fa & fb)),
                    "fell_only_in": {a: int(np.sum(fa & ~fb)), b: int(np.sum(fb & ~fa))},
                }
            )
    return out


SAME_INTRO = (
    "Facts two arms explain with the same removal set, and where they fell (original filtering): "
    "there a difference is the retrain's (the other facts' removals, the trajectory), not the explanation's."
)


def same_table(pairs: list[dict], title) -> list[str]:
    """The same-explanation pairs as markdown rows, each arm named by ``title(arm)``."""
    out = [
        "| arms | facts | fell in both | fell in the first only | fell in the second only |",
        "|---|---|---|---|---|",
    ]
    for p in pairs:
        a, b = p["arms"]
        only = p["fell_only_in"]
        out.append(f"| {title(a)}; {title(b)} | {p['facts']} | {p['fell_in_both']} | {only[a]} | {only[b]} |")
    return out


SIZES = (("same", "the same size"), ("larger", "the first larger"), ("smaller", "the first smaller"))
JOINS = (("both", "both"), ("first", "the first only"), ("second", "the second only"), ("neither", "neither"))


def _split_versus(records: dict[str, dict], versus, arms: list[str], masks_of) -> list[dict]:
    """Per arm against each ``versus`` arm: the facts of each group ``masks_of(arm, versus arm)`` names, and the falls."""
    fell = {a: np.asarray(records[a]["ranks"]["original"], np.float64) > 1 for a in arms}
    out = []
    for v in (v for v in versus if v in arms):
        for a in (a for a in arms if a != v):
            entry = {"arms": [a, v]}
            for key, m in masks_of(a, v).items():
                entry[key] = {"facts": int(m.sum()), "fell": {n: int(np.sum(fell[n] & m)) for n in (a, v)}}
            out.append(entry)
    return out


def sizes_versus(removed: dict[str, list], records: dict[str, dict], versus) -> list[dict]:
    """Per finished arm against each finished ``versus`` arm: the facts by explanation size, and the falls.

    Every arm's removals go at once, so a fact also loses what other facts' explanations remove;
    the size compared is its own explanation's.

    Args:
        removed: Arm name -> per graded fact, the training rows the arm removes.
        records: Arm name -> its finished record (``arms/NAME.json``).
        versus: The arms every other arm is compared with (``--versus``).

    Returns:
        One entry per (arm, versus arm) pair, versus arms in ``versus``'s order, arms in
        ``removed``'s: ``arms`` (the pair) and, for ``same``, ``larger`` and ``smaller`` (the first
        arm's explanation against the second's), ``facts`` and ``fell`` (arm name -> facts no
        longer first, original filter).
    """
    size = {a: np.array([len(x) for x in rows]) for a, rows in removed.items() if a in records}

    def masks(a, v):
        return {"same": size[a] == size[v], "larger": size[a] > size[v], "smaller": size[a] < size[v]}

    return _split_versus(records, versus, list(size), masks)


def joins(x: np.ndarray, f) -> np.ndarray:
    """Which of the triples ``x`` join the fact's head and tail (either way round)."""
    return ((x[:, 0] == f[0]) & (x[:, 2] == f[2])) | ((x[:, 0] == f[2]) & (x[:, 2] == f[0]))


def joins_versus(removed: dict[str, list], facts: np.ndarray, train_ids: np.ndarray, records, versus) -> list[dict]:
    """Per finished arm against each finished ``versus`` arm: the facts by which explanation joins head and tail.

    On a graph of symmetric relations a training fact joining a prediction's head and tail, such as
    (t, r, h), is often its main support, and an explanation that holds it breaks the prediction
    almost surely: the facts where one explanation holds it and the other does not show how much of
    a difference between two arms that one fact makes.

    Args:
        removed: Arm name -> per graded fact, the training rows the arm's explanation removes.
        facts: The graded facts ``[n, 3]``.
        train_ids: Training triples ``[M, 3]`` (the rows index them).
        records: Arm name -> its finished record (``arms/NAME.json``).
        versus: The arms every other arm is compared with (``--versus``).

    Returns:
        As :func:`sizes_versus`, with the groups ``both``, ``first`` (the first arm's explanation
        only), ``second`` and ``neither``.
    """
    held = {
        a: np.array([bool(np.any(joins(train_ids[np.asarray(r, np.int64)], f))) for r, f in zip(rows, facts)], bool)
        for a, rows in removed.items()
        if a in records
    }

    def masks(a, v):
        x, y = held[a], held[v]
        return {"both": x & y, "first": x & ~y, "second": ~x & y, "neither": ~x & ~y}

    return _split_versus(records, versus, list(held), masks)


SIZES_INTRO = (
    "Facts by the size of two arms' explanations (the first arm's against the second's), and how many "
    "each breaks there (original filtering): where the sizes are equal, a difference is what the "
    "explanations chose, not how much they removed."
)
JOINS_INTRO = (
    "Facts by which of two arms' explanations holds a training fact joining the fact's head and tail, and how many "
    "each breaks there (original filtering): where both or neither hold one, a difference is not that one fact."
)


def versus_table(pairs: list[dict], title, groups=SIZES, column: str = "explanations") -> list[str]:
    """:func:`sizes_versus` or :func:`joins_versus` as markdown rows (groups no fact is in left out).

    Args:
        pairs: The entries.
        title: Arm name -> how the table names it.
        groups: ``(key, words)`` per group, in row order.
        column: The second column's heading.
    """
    out = [f"| arms | {column} | facts | fell (first) | fell (second) |", "|---|---|---|---|---|"]
    for p in pairs:
        a, b = p["arms"]
        for key, words in groups:
            c = p[key]
            if c["facts"]:
                out.append(f"| {title(a)}; {title(b)} | {words} | {c['facts']} | {c['fell'][a]} | {c['fell'][b]} |")
    return out


def sizes_table(pairs: list[dict], title) -> list[str]:
    """:func:`sizes_versus` as markdown rows (sizes no fact has left out), each arm named by ``title(arm)``."""
    return versus_table(pairs, title)


def joins_table(pairs: list[dict], title) -> list[str]:
    """:func:`joins_versus` as markdown rows (groups no fact is in left out), each arm named by ``title(arm)``."""
    return versus_table(pairs, title, JOINS, "a fact joining head and tail in")
