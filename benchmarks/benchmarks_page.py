"""Render docs/benchmarks.md's tables, and those of the pages in other_pages.py, from what ``benchmarks/record.py`` filed.

    python benchmarks/benchmarks_page.py          # print the blocks
    python benchmarks/benchmarks_page.py --write  # rewrite them in their pages

Each block sits between ``<!-- NAME -->`` and ``<!-- /NAME -->`` on its page and is
built from ``benchmarks/results/*.json`` alone, so a figure on the page is always the file's
(tests/test_benchmarks_page_matches_results.py renders the blocks and compares them byte for byte).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from other_pages import evidence_blocks, gpu_blocks, testing_blocks  # the scripts beside this one
from page_cells import ROOT, header, lines, load, machine, machine_name, row, run_row

PAGE = ROOT / "docs" / "benchmarks.md"


def quality_block(train: dict, kelpie: dict) -> str:
    """Test metrics of the trainings: UMLS at the defaults and with its preset; FB15k-237 and WN18RR at Kelpie's settings."""
    out = [header("figure", "measured", "command", "machine", "commit")]
    for label, title in (("defaults", "UMLS, defaults, at most 100 epochs"), ("preset", "UMLS, `--preset umls`")):
        run = train["runs"][label]
        files = run["files"]
        test = next(v for k, v in files.items() if k.endswith("test_results.json"))["metrics"]["both"]
        epochs = len(next(v for k, v in files.items() if k.endswith("training_history.json")))
        out.append(
            run_row(
                title,
                f"test MRR {test['mrr']:.3f}, Hits@1 {test['hits@1']:.3f}, Hits@10 {test['hits@10']:.3f}; "
                f"stopped after {epochs} epochs, {run['seconds']:.0f} s in all",
                run,
            )
        )
    for key, title in (
        ("fb15k-237", "FB15k-237, Kelpie's ConvE settings (60 epochs)"),
        ("wn18rr", "WN18RR, Kelpie's ConvE settings (90 epochs)"),
        ("fb15k-237-cpu", "FB15k-237 on a CPU, Kelpie's ConvE settings"),
        ("wn18rr-cpu", "WN18RR on a CPU, Kelpie's ConvE settings"),
    ):
        d = kelpie["datasets"][key]
        both, tail = d["test_both"], d["test_tail"]
        out.append(
            row(
                title,
                f"test MRR {both['mrr']:.3f}, Hits@10 {both['hits@10']:.3f} (both sides); tail side MRR {tail['mrr']:.3f}",
                "`benchmarks/gpu/device_run.py`" + (" `--device cpu`" if key.endswith("-cpu") else ""),
                machine_name(d["machine"]),
                d["commit"].split()[0],
            )
        )
    return "\n".join(out)


def training_speed_block(pykeen: dict, cleanup: dict) -> str:
    """One training step against PyKEEN's and against its own GEMM floor; the cost of ``--memory-cleanup``."""
    run, paired = pykeen["runs"]["cpu"], pykeen["runs"]["cpu-paired"]
    s = lines(run)
    ours, fused, pk, floor = s["tracegraph"], s["tracegraph_fused"], s["pykeen"], s["floor"]
    p = lines(paired)["tracegraph"]
    off, on = (lines(cleanup["runs"]["cpu"])[f"memory_cleanup_{x}"] for x in ("off", "on"))
    out = [
        header("figure", "measured", "command", "machine", "commit"),
        run_row(
            "step vs PyKEEN 1.11 LCWA ConvE: 10k entities, 50k triples, d = 200, batch 512",
            f"{ours['value']:.3f} s/batch, {ours['peak_rss_mb']:.0f} MB (fused loss {fused['value']:.3f} s, "
            f"{fused['peak_rss_mb']:.0f} MB); PyKEEN {pk['value']:.2f} s/batch, {pk['peak_rss_mb'] / 1000:.1f} GB: "
            f"**{ours['speedup_vs_pykeen']:.0f}× faster, {ours['memory_fraction_of_pykeen']:.3f} of the memory**; "
            f"{ours['ratio_to_floor']:.2f}× the fp32 GEMM floor ({floor['value']:.3f} s)",
            run,
        ),
        run_row(
            "the same step against its fp32 GEMM floor, timed paired (step, then one pass over the floor's "
            "matmul shapes, alternately in one process)",
            f"**{p['paired_ratio_to_floor']:.2f}×** the floor (interquartile range of the "
            f"{p['timed_batches']} per-batch ratios {p['paired_ratio_iqr'][0]:.2f}–{p['paired_ratio_iqr'][1]:.2f})",
            paired,
        ),
        run_row(
            "`--memory-cleanup` on UMLS",
            f"{on['value']:.3f} s/epoch on, {off['value']:.3f} off ({on['time_ratio_on_over_off']:.2f}×); each cleanup "
            f"{on['cleanup_call_ms']:.0f} ms; peak memory {on['peak_rss_ratio_on_over_off']:.2f}× off's: off by default",
            cleanup["runs"]["cpu"],
        ),
    ]
    return "\n".join(out)


def memory_block(mem: dict) -> str:
    """Peak memory of one training step at a million entities, by loss."""
    run = mem["runs"]["cpu"]
    s = lines(run)
    fused, std, dense = s["fused"], s["standard"], s["dense_labels"]

    def measured(x: dict) -> str:
        if x["value"] is None:
            return "did not fit and could not be extrapolated"
        if x["estimated"]:
            fit = " and ".join(f"{n // 1000:,}k" for n, _ in x["fit_points"])
            return f"≈ {x['value']:.1f} GB (extrapolated from {fit} entities)"
        return f"{x['value']:.2f} GB"

    out = [
        f"One training step, {fused['entities']:,} entities, batch {fused['batch_size']:,}, d = 200 "
        f"(`{run['command']}`, {machine(run)}, commit {run['commit']}):",
        "",
        header("loss", "peak memory of the step"),
        row(
            "fused (`--loss-impl fused`)",
            f"**{fused['loss_overhead_gb']:.2f} GB above the built model**; forward + backward peak "
            f"{fused['peak_forward_backward_gb']:.2f} GB; whole step {measured(fused)}",
        ),
        row("standard (B×N logits)", f"whole step {measured(std)}"),
        row("a dense label matrix", f"whole step {measured(dense)}"),
        "",
        "The whole step's floor is the weights, their gradient and Adam's two moments: "
        f"{fused['weights_gb'] + fused['weights_gb'] + fused['adam_state_gb']:.1f} GB at this size before any activation.",
    ]
    return "\n".join(out)


def filtering_block(speed: dict) -> str:
    """Index build and per-triple filtering times on a power-law graph."""
    run = speed["runs"]["cpu"]
    s = lines(run)
    g = s["build"]["graph"]
    two, path, hub, hub_path = s["2hop"], s["2hop_path3"], s["2hop_hubs"], s["2hop_path3_hubs"]
    return (
        f"{g['edges'] / 1e6:.0f}M-edge power-law graph ({g['nodes']:,} nodes, max degree {g['max_degree']:,}), "
        f"{two['triples']} held-out triples (`{run['command']}`, {machine(run)}, commit {run['commit']}): "
        f"index build {s['build']['value']:.1f} s (cache read {s['cache_read']['value']:.1f} s); "
        f"2 hops {two['value']:.4f} s per test triple (max {two['max_s']:.3f} s), with path filtering "
        f"L = 3 {path['value']:.4f} s; triples joining the top hubs {hub['value']:.2f} s "
        f"({hub_path['value']:.2f} s with paths, max {hub_path['max_s']:.2f} s)."
    )


def trees_block(probe: dict, memory: dict, vessels: dict, paths: dict) -> str:
    """GT-SSL: the linear probe's gain from pretraining; an epoch with and without gradient checkpointing; vessel masks."""
    prun, mrun, vrun = probe["runs"]["cpu"], memory["runs"]["cpu"], vessels["runs"]["cpu"]
    study = next(iter(prun["files"].values()))
    plain, ck = sorted(mrun["lines"], key=lambda x: x["gradient_checkpointing"])
    v = vrun["lines"][0]
    big = max(paths["runs"]["cpu"]["lines"], key=lambda x: x["nodes"])
    mb = 2**20
    out = [
        header("figure", "measured", "command", "machine", "commit"),
        run_row(
            "linear probe, pretrained vs random encoder",
            f"{100 * study['pretrained_mean']:.1f} ± {100 * study['pretrained_std']:.1f} % vs "
            f"{100 * study['random_mean']:.1f} ± {100 * study['random_std']:.1f} %: "
            f"**+{study['gain_points_mean']:.1f} ± {study['gain_points_std']:.1f} points** ({len(study['seeds'])} seeds)",
            prun,
        ),
        run_row(
            f"pretraining epoch, {plain['trees']:,} trees of ~{plain['nodes_mean']:.0f} nodes, 1 thread",
            f"{plain['epoch_seconds']:.1f} s; {ck['epoch_seconds']:.1f} s with gradient checkpointing "
            f"(saved activations {plain['activation_bytes_per_batch'] / mb:.0f} → "
            f"{ck['activation_bytes_per_batch'] / mb:.0f} MB per batch)",
            mrun,
        ),
        run_row(
            f"{v['image_shape'][1]}×{v['image_shape'][0]} vessel masks → trees of {v['nodes_mean']:.0f} nodes, "
            f"{v['trees']:,}-tree epoch",
            f"{v['epoch_seconds']:.1f} s, {v['ratio_to_baseline']:.2f}× the synthetic epoch timed in the same process; "
            f"mask → tree {v['mask_to_tree_seconds_mean']:.1f} s per image",
            vrun,
        ),
        run_row(
            f"3rd-order paths per node, {big['nodes']:,}-node tree vs a kNN-8 graph of the same points",
            f"{big['tree_paths_per_node']:.1f} vs {big['knn8_paths_per_node']:.0f}",
            paths["runs"]["cpu"],
        ),
    ]
    return "\n".join(out)


def tracin_block(speed: dict) -> str:
    """Exact TracIn against a plain forward pass and the per-example autograd loop, one table per recorded run."""
    return "\n\n".join(tracin_run(run) for run in speed["runs"].values())


def per_triple(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds >= 0.1 else f"{1000 * seconds:.1f} ms"


def tracin_run(run: dict) -> str:
    s = lines(run)
    fwd, one, many = s["plain_forward"], s["exact_T1"], s["exact_T256"]
    loop1, loop256 = s["autograd_T1"], s["autograd_T256"]
    n_train = int(re.search(r"(\d[\d,]*) training triples", one["problem"]).group(1).replace(",", ""))
    out = [
        f"{one['problem']}; `{run['command']}` on {machine(run)}, commit {run['commit']}:",
        "",
        header("setting", "measured"),
        row("plain forward pass", f"{fwd['seconds']:.2f} s"),
        row("exact, 1 test triple", f"{one['seconds']:.3g} s = **{one['ratio_to_plain_forward']:.2f}× the forward**"),
        row("exact, 256 test triples", f"{per_triple(many['seconds_per_test_triple'])} per test triple"),
        row(
            "autograd loop (reference; timed on "
            f"{loop1['timed_sample_training_triples']} training triples, extrapolated)",
            f"{1000 * loop1['seconds_extrapolated'] / n_train:.1f} ms per training triple",
        ),
        row(
            "exact vs the autograd loop",
            f"{loop1['exact_speedup_per_test_triple']:.0f}× (T = 1), "
            f"{loop256['exact_speedup_per_test_triple']:.0f}× per test triple (T = 256)",
        ),
    ]
    return "\n".join(out)


NECESSITY_ARMS = {
    "tracin-margin-path": "tracegraph's default",
    "kelpie": "Kelpie's explanations",
    "random-head": "4 random facts of the head",
    "far": "far facts, {n} in all (neither end of a graded fact; as many as the random arm, or all there are)",
    "noise": "nothing removed, another seed",
}


def necessity_block(umls: dict, kelpie: dict) -> str:
    """ΔHits@1 of the default explanation beside its controls, per dataset, from the side-by-side runs."""
    out = [header("dataset, facts", "removed", "ΔHits@1", "s / explanation", "machine", "commit")]
    for title, res, key, facts in (
        ("UMLS, own facts", umls, "umls", "own-facts"),
        ("FB15k-237, Kelpie's facts", kelpie, "fb15k-237-cpu", "kelpie-facts"),
        ("FB15k-237, Kelpie's facts, 3 retrain seeds pooled", kelpie, "fb15k-237", "pooled"),
        ("WN18RR, Kelpie's facts", kelpie, "wn18rr-cpu", "kelpie-facts"),
    ):
        d = res["datasets"].get(key)
        fs = d and (d["fact_sets"].get(facts) or d.get(facts))
        if fs and facts == "pooled":  # the pooled file lists its arms, every one finished
            fs = {**fs, "finished": fs["arms"]}
        if not fs or "tracin-margin-path" not in fs["finished"]:
            continue  # the default's arm not measured yet: no row rather than a row without its figure
        for arm, what in NECESSITY_ARMS.items():
            if arm not in fs["finished"]:
                continue
            a = fs["summary"][arm]
            lo, hi = a["original"]["change_hits@1_ci95"]
            sec = a.get("seconds_per_explanation")
            out.append(
                row(
                    f"{title} ({fs['n_facts']})",
                    what.format(n=a.get("facts_removed")),
                    f"{a['original']['change_hits@1']:+.2f} [{lo:+.2f}, {hi:+.2f}]",
                    f"{sec:.2f}" if sec else "—",
                    machine_name(d.get("machine") or res["machine"])
                    + (", shared with other work" if "shared the" in d.get("load", res.get("load", "")) else ""),
                    (d.get("commit") or res["commit"]).split()[0],
                )
            )
    return "\n".join(out)


def page_blocks() -> dict[str, str]:
    """Every generated block of the benchmarks page, by marker name."""
    return {
        "bench:quality": quality_block(load("train_umls"), load("necessity_kelpie")),
        "bench:training-speed": training_speed_block(load("train_vs_pykeen"), load("memory_cleanup")),
        "bench:memory": memory_block(load("train_memory_1m")),
        "bench:tracin": tracin_block(load("tracin_speed")),
        "bench:necessity": necessity_block(load("compare_umls"), load("necessity_kelpie")),
        "bench:filtering": filtering_block(load("filter_speed")),
        "bench:trees": trees_block(
            load("trees_probe"), load("trees_memory"), load("trees_vessels"), load("trees_paths")
        ),
    }


def write_blocks(page: Path, blocks: dict[str, str]) -> None:
    """Rewrite each ``<!-- NAME -->`` … ``<!-- /NAME -->`` block of ``page`` in place."""
    text = page.read_text()
    for name, block in blocks.items():
        if f"<!-- {name} -->" not in text:
            sys.exit(f"error: {page}: no <!-- {name} --> marker to write the block into")
        head, rest = text.split(f"<!-- {name} -->", 1)
        text = f"{head}<!-- {name} -->\n{block}\n<!-- /{name} -->{rest.split(f'<!-- /{name} -->', 1)[1]}"
    page.write_text(text)


EVIDENCE = ROOT / "docs" / "demo-evidence.md"
TESTING = ROOT / "docs" / "testing.md"
GPU = ROOT / "docs" / "gpu.md"

if __name__ == "__main__":
    pages = {PAGE: page_blocks(), EVIDENCE: evidence_blocks(), TESTING: testing_blocks(), GPU: gpu_blocks()}
    for path, blocks in pages.items():
        if "--write" in sys.argv[1:]:
            write_blocks(path, blocks)
        else:
            print("\n\n".join(f"<!-- {k} -->\n{v}" for k, v in blocks.items()))
