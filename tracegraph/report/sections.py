"""The report's general sections: settings, training, metrics (overall and per relation).

Each returns a :class:`Section`; the explained test triples' section is report/explained.py's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracegraph.report.html import Section, breakable, clip, e, img, num, table
from tracegraph.report.plots import training_curves

SETTING_CHARS = 140  # a longer setting is cut in the middle, whole in its title
PER_RELATION_ROWS = 60  # a graph with more relations lists the most frequent; ranks.csv has them all


def settings_section(config: dict, extra: dict | None = None) -> Section:
    """The section listing every recorded setting of the run (``config.json``, nested keys joined by dots).

    Args:
        config: The run's config.json content.
        extra: More settings to list, or None.

    Returns:
        The section.
    """
    # train.model repeats model (the built model's full configuration) less the sizes: shown once
    flat = _flatten(
        {
            k: ({kk: vv for kk, vv in v.items() if kk != "model"} if k == "train" and isinstance(v, dict) else v)
            for k, v in config.items()
        }
    )
    if extra:
        flat.update(_flatten(extra))
    if not flat:
        return Section("settings", "<h2>Settings</h2><p class='note'>This run has no config.json.</p>")
    # long values (hashes, paths) wrap; past SETTING_CHARS they are cut in the middle, whole on hover
    items = "".join(f"<div><span>{breakable(k)}</span> {clip(v, SETTING_CHARS)}</div>" for k, v in flat.items())
    return Section(
        "settings",
        f"<h2>Settings</h2><p class='note'>From the run's <code>config.json</code>.</p>"
        f"<div class='settings'>{items}</div>",
    )


def _flatten(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = "—" if v is None else v
    return out


def training_section(history: list[dict], loss_name: str = "training loss", config: dict | None = None) -> Section:
    """The section with training loss and valid MRR per epoch, under a line of the main settings.

    Args:
        history: The rows of ``training_history.json``.
        loss_name: The loss axis label.
        config: The run's config.json content, for the settings line.

    Returns:
        The section.
    """
    line = _key_settings(config or {})
    if not history:
        return Section(
            "training",
            f"<h2>Training</h2>{line}<p class='note'>This run records no training history "
            "(an imported model, or one trained elsewhere).</p>",
        )
    valid = [r["valid"]["mrr"] for r in history if "mrr" in (r.get("valid") or {})]
    best = f"; best valid MRR {num(max(valid))}" if valid else "; no validation recorded"
    secs = sum(r.get("seconds") or 0 for r in history)
    return Section(
        "training",
        f"<h2>Training</h2>{line}{img(training_curves(history, loss_name), 'training curves')}"
        f"<p>{len(history)} epochs recorded, {num(secs, 0)} s of training{best}.</p>",
    )


def _key_settings(config: dict) -> str:
    """One line of the settings a reader asks for first.

    Every setting is in the Settings section; an imported run records few, and only those recorded
    are named.
    """
    t, m = config.get("train") or {}, config.get("model") or {}

    def phrase(fmt: str, *keys, src=t) -> str:
        return fmt.format(*(src[k] for k in keys)) if all(src.get(k) is not None for k in keys) else ""

    model = [
        phrase("ConvE, embeddings {} ({}×{})", "embedding_dim", "embedding_height", "embedding_width", src=m),
        phrase("{} channels", "output_channels", src=m),
        "reciprocal relations" if m.get("reciprocal") else "",
    ]
    train = [
        phrase("{} epochs", "epochs"),
        phrase("batch {}", "batch_size"),
        phrase("{} at learning rate {}", "optimizer", "learning_rate"),
        phrase("loss {}", "loss"),
        phrase("{}", "training_mode"),
        phrase("label smoothing {}", "label_smoothing"),
        phrase("seed {}", "seed"),
    ]
    source = (config.get("source") or {}).get("format")
    parts = [
        ", ".join(p for p in model if p),
        ", ".join(p for p in train if p),
        f"imported from {source}" if source else "",
    ]
    text = "; ".join(p for p in parts if p)
    return f"<p class='note'>{e(text)}.</p>" if text else ""


def side_metrics(ranks: pd.DataFrame) -> dict[str, dict]:
    """MRR, MR and Hits@1/3/10 per side (tail, head) and over both, from realistic filtered ranks.

    Args:
        ranks: ``ranks.csv`` rows (``side`` and ``rank`` columns).

    Returns:
        Side to its metrics; sides without ranks are left out.
    """
    out = {}
    for side in ("tail", "head", "both"):
        r = (
            ranks["rank"].to_numpy(float)
            if side == "both"
            else ranks.loc[ranks["side"] == side, "rank"].to_numpy(float)
        )
        if len(r):
            out[side] = {
                "count": len(r),
                "mrr": float(np.mean(1 / r)),
                "mr": float(np.mean(r)),
                **{f"hits@{k}": float(np.mean(r <= k)) for k in (1, 3, 10)},
            }
    return out


def metrics_section(ranks: pd.DataFrame | None, source: str, relation_names: dict | None = None) -> Section:
    """The section with filtered-rank metrics overall (per side) and per relation.

    Args:
        ranks: ``ranks.csv`` rows, or None.
        source: Where the ranks came from (HTML).
        relation_names: A relation label's readable name (a KGX run's ``biolink:treats``), shown
            beside it; None for none.

    Returns:
        The section.
    """
    if ranks is None or ranks.empty:
        return Section("metrics", f"<h2>Test metrics</h2><p class='note'>{source}</p>")
    m = side_metrics(ranks)
    rows = [
        [e(s), str(v["count"]), num(v["mrr"]), num(v["mr"], 1), num(v["hits@1"]), num(v["hits@3"]), num(v["hits@10"])]
        for s, v in m.items()
    ]
    overall = table(["side", "ranks", "MRR", "MR", "Hits@1", "Hits@3", "Hits@10"], rows)
    per = []
    groups = sorted(ranks.groupby("relation", sort=False), key=lambda g: (-len(g[1]), str(g[0])))
    for rel, g in groups[:PER_RELATION_ROWS]:
        r = g["rank"].to_numpy(float)
        side = {s: g.loc[g["side"] == s, "rank"].to_numpy(float) for s in ("tail", "head")}
        name = (relation_names or {}).get(rel)
        per.append(
            [
                e(f"{name} ({rel})" if name and name != rel else rel),
                str(int((g["side"] == "tail").sum()) or len(g)),
                *(num(np.mean(1 / side[s])) if len(side[s]) else "—" for s in ("tail", "head")),
                num(np.mean(r <= 1)),
                num(np.mean(r <= 10)),
            ]
        )
    more = (
        f"<p class='note'>The {PER_RELATION_ROWS} most frequent of {len(groups)} relations; ranks.csv has them all.</p>"
        if len(groups) > PER_RELATION_ROWS
        else ""
    )
    return Section(
        "metrics",
        f"<h2>Test metrics</h2><p>Filtered ranks (ties: mean rank), {source}.</p>{overall}"
        f"<h3>Per relation</h3>"
        + table(["relation", "test triples", "MRR tail", "MRR head", "Hits@1", "Hits@10"], per)
        + more,
    )


__all__ = ["metrics_section", "settings_section", "side_metrics", "training_section"]
