"""The demo's ``report.html``: one self-contained page (PNG images base64-embedded, no network).

Every piece of text from data goes through :func:`html.escape`.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np

from tracegraph.kg.demo.report_plots import subgraph, training_curves
from tracegraph.kg.explain.methods import DEFAULT_EXPLAINER
from tracegraph.kg.explain.necessity import RANDOM_ARMS
from tracegraph.runtime.checkpoints import atomic_write_text

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1080px;margin:2em auto;padding:0 1em;
color:#1e293b;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.1em}h2{border-bottom:2px solid #e2e8f0;padding-bottom:.2em;margin-top:1.8em}
h3{margin-bottom:.3em}.sub{color:#64748b;margin-top:0}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.88em}
th,td{border-bottom:1px solid #e2e8f0;padding:.28em .6em;text-align:left;vertical-align:top}
th{background:#f8fafc}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.mech td{background:#fef3c7}tr.best td{font-weight:600}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{background:#f8fafc;border:1px solid #e2e8f0;border-radius:8px;
padding:.7em 1em;min-width:180px}.card b{font-size:1.4em;display:block}
.pred{border:1px solid #e2e8f0;border-radius:10px;padding:.4em 1.2em 1em;margin:1.2em 0}
.tag{display:inline-block;background:#fef3c7;border:1px solid #d97706;border-radius:4px;padding:0 .35em;font-size:.8em}
.ok{color:#15803d}.bad{color:#b91c1c}.note{color:#475569;font-size:.9em}code{background:#f1f5f9;padding:0 .2em}
img{max-width:100%}.two{display:grid;grid-template-columns:1fr 1fr;gap:1em}
"""

e = html.escape


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _f(x, nd=3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and not np.isfinite(x):
        return "∞"
    return f"{x:.{nd}f}" if isinstance(x, (float, np.floating)) else e(str(x))


def _table(header: list[str], rows: list[list], classes: list[str] | None = None, num_from: int = 1) -> str:
    th = "".join(f"<th>{e(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        tds = "".join(f'<td class="num">{c}</td>' if j >= num_from else f"<td>{c}</td>" for j, c in enumerate(row))
        body.append(f"<tr{cls}>{tds}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


class _Namer:
    def __init__(self, names, entities, relations):
        self.names, self.ent, self.rel = names, entities, relations

    def node(self, i) -> str:
        lab = self.ent[int(i)]
        return self.names.get(lab, lab)

    def node_html(self, i) -> str:
        lab = self.ent[int(i)]
        return f'{e(self.names.get(lab, lab))} <span class="note">{e(lab)}</span>'

    def rel_html(self, r) -> str:
        return e(self.rel[int(r)].removeprefix("biolink:"))


def _metrics_section(metrics: dict, counts: dict, history: list[dict]) -> str:
    rows = []
    for side, label in (("tail", "tail (drug treats ?)"), ("head", "head (? treats disease)"), ("both", "both")):
        if side in metrics:
            m = metrics[side]
            rows.append([e(label), _f(m["mrr"]), _f(m["mr"], 1), _f(m["hits@1"]), _f(m["hits@3"]), _f(m["hits@10"])])
    best = max((r["valid"]["mrr"] for r in history if "valid" in r), default=None)
    return (f"<h2>Training</h2>{_img(training_curves(history), 'training curves')}"
            f"<p>Filtered ranks of the {counts.get('test', '')} held-out <code>treats</code> edges under the final "
            f"model (ties: mean rank); best valid MRR during training {_f(best)}.</p>"
            + _table(["side", "MRR", "MR", "Hits@1", "Hits@3", "Hits@10"], rows))


def _recovery_section(fid: dict) -> str:
    rec, other = fid["recovery"], fid.get("recovery_other_loss")
    s = rec["summary"]
    cols = list(next(iter(s.values())).keys())
    loss = rec.get("influence", {}).get("loss", "")
    label = {"tracin": f"TracIn (--loss {loss})", "tracin-cosine": f"TracIn-cosine (--loss {loss})",
             "relatif": f"RelatIF (--loss {loss})", "local-retrain": "local retrain (Kelpie-style)",
             "random": "random order", "degree": "degree", "path": "short head–tail paths"}
    rows, classes = [], []
    best = max(s, key=lambda m: s[m]["mrr"]["mean"] or 0)
    for m, v in s.items():
        rows.append([e(label.get(m, m))] + [f"{_f(v[c]['mean'])} ± {_f(v[c]['std'], 2)}" for c in cols])
        classes.append("best" if m == best else "")
    if other:
        o = other["summary"]["tracin"]
        rows.append([e(f"TracIn (--loss {other['influence']['loss']}), for comparison")]
                    + [f"{_f(o[c]['mean'])} ± {_f(o[c]['std'], 2)}" for c in cols])
        classes.append("")
    d = rec["definition"]
    return (f"<h2>Explanation quality: ground-truth recovery</h2><p>For each of the {rec['graded']} test triples, "
            f"the candidates are the {e(d['candidates'])} ({_f(rec['mean_candidates'], 0)} on average); the relevant "
            f"ones are {e(d['relevant'])}. {_f(100 * rec['mechanism_edge_coverage'], 1)} % of the mechanism edges lie "
            f"among the candidates. Mean ± std over test triples; ties {e(d['ties'])}.</p>"
            + _table(["ranking", "MRR", "MAP", "Hits@1", "Hits@3", "Hits@10", "Recall@10"], rows, classes)
            + f"<p class='note'>MRR: 1/rank of the first mechanism edge. Hits@k: a mechanism edge in the top k. "
              f"Baselines: degree = {e(d['baselines']['degree'])}; paths = {e(d['baselines']['path'])}.</p>")


def _necessity_section(nec: dict) -> str:
    head = ("<h2>Explanation quality: necessity test</h2><p>The test that needs no planted answers "
            "(<code>tracegraph fidelity necessity</code>, after Kelpie). Facts: the test edges the model ranks first "
            "(filtered, tail side). Per arm, every fact's top-k training triples are removed <em>at once</em> and the "
            "model is retrained <em>once</em> with the run's configuration and seed; removed triples are masked out of "
            "their batches, so every other batch stays as it was. Arms: each method's top-k; <b>neighbour</b>: k "
            "random triples touching the fact's head or tail; <b>far</b>: k random triples touching neither (the noise "
            "floor, ≈ 0). Δ = before − after (positive: the facts got worse). <b>Above far</b>: the arm's ΔH@1 minus "
            "far's, paired by fact — what the removal did beyond the floor. <b>Of them at each fact</b>: how many of the "
            "removed triples touch a fact's head or tail, on average — every fact's removals go at once, so on a small "
            "graph one fact's far draws are another's neighbours.</p>")
    if not nec.get("summary"):
        return head + f"<p class='bad'>{e(nec.get('note', 'nothing graded'))}</p>"
    rows = []
    for name, v in nec["summary"].items():
        arm, k = name.rsplit("@", 1)
        lo, hi = v["delta_hits@1_ci95_first_seed"]
        above = _f(v["above_far_hits@1"]["mean"]) if "above_far_hits@1" in v else "—"
        rows.append([e(arm), k, f"{_f(v['delta_hits@1']['mean'])} ({_f(lo)}–{_f(hi)})", above, _f(v["delta_mrr"]["mean"]),
                     _f(v["hits@1"]["mean"]), _f(v["mrr"]["mean"]), _f(v["mean_rank"]["mean"], 1),
                     str(v["triples_removed"]), _f(v["removed_at_fact"], 1) if "removed_at_fact" in v else "—"])
    return (head + _table(["arm", "k", "ΔH@1 (95 % CI)", "above far", "ΔMRR", "H@1 after", "MRR after", "mean rank after",
                           "triples removed", "of them at each fact"], rows, num_from=1)
            + f"<p class='note'>{nec['n_facts']} facts; explanations {_f(nec['explain_seconds'], 0)} s, "
              f"whole test {_f(nec['seconds'], 0)} s. Files: <code>necessity/</code>.</p>")


def _prediction(p: dict, namer: _Namer, n_pro: int = 10, n_opp: int = 5) -> str:
    h, r, t = (int(x) for x in p["triple"])
    cand, infl, rel = p["candidates"], np.asarray(p["influence"]), p["relevant"]
    order = np.argsort(-infl, kind="stable")
    is_mech = np.array([tuple(int(x) for x in c) in rel for c in cand], dtype=bool)

    def rows(idx, start_rank):
        out, cls = [], []
        for k, i in enumerate(idx):
            c = cand[i]
            tag = ' <span class="tag">mechanism</span>' if is_mech[i] else ""
            out.append([str(start_rank(k)), namer.node_html(c[0]), namer.rel_html(c[1]) + tag, namer.node_html(c[2]),
                        f"{infl[i]:.4g}"])
            cls.append("mech" if is_mech[i] else "")
        return out, cls

    pro, pcls = rows(order[:n_pro], lambda k: k + 1)
    n_opp = min(n_opp, max(len(order) - n_pro, 0))  # few candidates: no row both proponent and opponent
    opp, ocls = rows(order[::-1][:n_opp], lambda k: len(order) - k)
    mech_ranks = sorted(int(np.flatnonzero(order == i)[0]) + 1 for i in np.flatnonzero(is_mech))
    edges, shown = [], set()
    for k, i in enumerate(order[:n_pro]):
        edges.append((int(cand[i][0]), int(cand[i][2]), k, "mechanism+proponent" if is_mech[i] else "proponent"))
        shown.add(int(i))
    for i in order[::-1][:n_opp]:
        if int(i) not in shown:
            edges.append((int(cand[i][0]), int(cand[i][2]), 99, "opponent"))
            shown.add(int(i))
    for i in np.flatnonzero(is_mech):
        if int(i) not in shown:
            edges.append((int(cand[i][0]), int(cand[i][2]), 99, "mechanism"))
            shown.add(int(i))
    labels = {n: namer.node(n) for u, v, _, _ in edges for n in (u, v)} | {h: namer.node(h), t: namer.node(t)}
    context = [(int(cand[i][0]), int(cand[i][2])) for i in range(len(cand)) if int(i) not in shown]
    pic = _img(subgraph(h, t, edges, labels, context), f"subgraph around {namer.node(h)} and {namer.node(t)}")
    mr = ", ".join(map(str, mech_ranks)) if mech_ranks else "none among the candidates"
    return (f'<div class="pred"><h3>{namer.node_html(h)} — {namer.rel_html(r)} → {namer.node_html(t)}</h3>'
            f"<p class='sub'>filtered tail rank {_f(p['rank'], 1)}, score {_f(p['score'], 2)} "
            f"(σ = {1 / (1 + np.exp(-p['score'])):.3f}); {len(cand)} candidate training triples; mechanism edges "
            f"({len(rel)}) ranked {e(mr)} by TracIn.</p>"
            f"<h4>Top {n_pro} proponents</h4>" + _table(["#", "head", "relation", "tail", "TracIn"], pro, pcls, num_from=4)
            + f"<h4>Top {n_opp} opponents (lowest TracIn)</h4>" + _table(["#", "head", "relation", "tail", "TracIn"], opp, ocls, num_from=4)
            + pic + "</div>")


def write_report(path, *, history, metrics, counts, predictions, fidelity, names, entities, relations, settings,
                 stage_seconds) -> Path:
    namer = _Namer(names, entities, relations)
    rec, nec = fidelity["recovery"]["summary"], fidelity.get("necessity", {})
    baselines = [m for m in ("path", "degree", "random") if m in rec]
    methods = [m for m in rec if m not in baselines]
    mrr_map = lambda m: (rec[m]["mrr"]["mean"] or 0.0, rec[m]["map"]["mean"] or 0.0)
    best = max(methods, key=lambda m: mrr_map(m))
    b_mrr, b_map = mrr_map(best)
    wins = all(b_mrr > mrr_map(m)[0] and b_map > mrr_map(m)[1] for m in baselines)
    arms = nec.get("summary", {})
    dh1 = {name.split("@")[0]: v["delta_hits@1"]["mean"] for name, v in arms.items()}
    nec_best = max((a for a in dh1 if a not in RANDOM_ARMS), key=dh1.get, default=None)
    nec_ok = nec_best is not None and dh1[nec_best] >= 2 * max(dh1.get("neighbour", 0.0), 0.0) and dh1[nec_best] > 0
    cards = [("test MRR (both sides)", _f(metrics["both"]["mrr"])),
             (f"best method: {best} (recovery MRR / MAP)",
              f"<span class='{'ok' if wins else 'bad'}'>{_f(b_mrr)} / {_f(b_map)}</span>"),
             *([(f"explain's default: {DEFAULT_EXPLAINER} (MRR / MAP)",
                 f"{_f(mrr_map(DEFAULT_EXPLAINER)[0])} / {_f(mrr_map(DEFAULT_EXPLAINER)[1])}")]
               if DEFAULT_EXPLAINER in rec and DEFAULT_EXPLAINER != best else []),
             *((f"baseline {m} (MRR / MAP)", f"{_f(mrr_map(m)[0])} / {_f(mrr_map(m)[1])}") for m in baselines[:2]),
             (f"necessity ΔH@1: {nec_best or '–'} / neighbour / far",
              f"<span class='{'ok' if nec_ok else 'bad'}'>{_f(dh1.get(nec_best))}</span> / "
              f"{_f(dh1.get('neighbour'))} / {_f(dh1.get('far'))}")]
    cards_html = "".join(f'<div class="card">{e(k)}<b>{v}</b></div>' for k, v in cards)
    total = sum(v for v in stage_seconds.values() if v)
    timing = _table(["stage", "seconds"], [[e(k), _f(v, 1)] for k, v in stage_seconds.items()] + [["total (before report)", _f(total, 1)]])
    settings_rows = [[e(k), e(str(v))] for k, v in settings.items()]
    body = (f"<h1>tracegraph demo</h1><p class='sub'>ConvE link prediction on a synthetic biomedical graph with planted "
            f"drug mechanisms, explained with exact TracIn and graded against the ground truth.</p>"
            f"<div class='cards'>{cards_html}</div>"
            f"<p>{counts.get('entities')} entities, {counts.get('relations')} relations, {counts.get('train')} training "
            f"triples; {counts.get('test')} held-out <code>treats</code> edges, each planted by a mechanism path of 2–4 "
            f"edges that stays in the training graph.</p>"
            + _metrics_section(metrics, counts, history) + _recovery_section(fidelity) + _necessity_section(nec)
            + f"<h2>The best-predicted test edges, explained</h2><p>TracIn (--loss "
              f"{e(fidelity['recovery']['influence']['loss'])}, all layers, "
              f"{len(fidelity['recovery']['influence']['checkpoints'])} checkpoints) over each test edge's filtered "
              f"subgraph. Rows with a <span class='tag'>mechanism</span> tag are ground-truth mechanism edges. Positive TracIn: "
              f"training on that triple made the prediction more likely.</p>"
            + "".join(_prediction(p, namer) for p in predictions)
            + "<h2>Run</h2><div class='two'><div>" + _table(["setting", "value"], settings_rows, num_from=9)
            + "</div><div>" + timing + "</div></div>")
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>tracegraph demo report</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")
    atomic_write_text(path, page)
    return Path(path)


__all__ = ["write_report"]
