"""The demo's driver (kg/demo/pipeline.py) by hand, with every heavy stage replaced by a recording stand-in.

Generation, training, the fidelity context, evaluation, TracIn, the graded methods, explain's files,
the necessity test and the report writer are stand-ins that record what they are given, in which
stage (the numbered rule line printed last), inside which progress display and whether inside
``quiet()``; the clock is a list of hand-picked times. What it holds, against hand-written values
(the sizes of docs/demo.md's stage table and ``--quick``, the documented defaults):

* the stages in their order, each announced by its numbered rule and closed by its check line with
  its seconds, and every progress message word for word;
* the settings each stage is given: the graph's sizes and seed, the training configuration (paths
  under ``data/`` and ``run/``, the preset's sizes, seed, device, patience 0, overwrite), the fidelity,
  explain and necessity configurations, the methods graded, the loss compared (the other of the
  preset's: score for logit, logit for score);
* the best-predicted test edges (filtered rank first, then the model's score), written to
  ``explanations/selected_test.txt`` (replacing an earlier run's) and explained over their own subgraphs;
* the fidelity context left as the main loss's after the comparison;
* ``fidelity.json``, the report's arguments (marks by label, checkpoint count, settings) and
  ``demo_summary.json`` (returned too), with the necessity test's note when it has no fact;
* torch's thread count set for the run and restored after it, also when the run fails;
* the CLI's options reaching the configuration, its refusals as one ``error:`` line, and ``--help``
  saying what ``--quick`` and ``--n-explain`` do (no removal grading: the demo runs none).
"""

import contextlib
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.conftest import run_cli, run_cli_error
from tests.kg.references import Bars
from tracegraph.errors import DataError
from tracegraph.kg.demo import pipeline
from tracegraph.kg.demo.pipeline import STAGES, DemoConfig, Preset, preset, run_demo
from tracegraph.kg.demo.synthetic import SyntheticConfig
from tracegraph.kg.explain.fidelity import FidelityConfig, FidelityContext
from tracegraph.kg.explain.necessity import NecessityConfig
from tracegraph.kg.explain.tracin.explain import ExplainConfig
from tracegraph.kg.model.train import TrainConfig

DEFAULT_MODEL = {"embedding_dim": 64, "embedding_height": 8, "embedding_width": 8, "output_channels": 32}
QUICK_MODEL = {"embedding_dim": 32, "embedding_height": 4, "embedding_width": 8, "output_channels": 8}
GRADED = ("tracin-margin", "tracin-margin-path", "tracin-cosine", "relatif", "tracin-path")

# t_start, then each stage's start and end (generate 1.25, train 10.5, evaluate 0.75, filter 0.004,
# explain 3, grade 7, necessity 32, report 1.333), then the end: 69.5014 s in all, 69.5 to two decimals
TIMES = [
    0.5,
    1.0,
    2.25,
    3.0,
    13.5,
    14.0,
    14.75,
    15.0,
    15.004,
    16.0,
    19.0,
    20.0,
    27.0,
    28.0,
    60.0,
    61.0,
    62.333,
    70.0014,
]
SECONDS = {
    "generate": 1.25,
    "train": 10.5,
    "evaluate": 0.75,
    "filter": 0.0,
    "explain": 3.0,
    "grade": 7.0,
    "necessity test": 32.0,
}

COUNTS = {"entities": 6, "relations": 2, "train": 10, "valid": 1, "test": 4}
METRICS = {"both": {"mrr": 0.4567}, "tail": {"mrr": 0.5}, "head": {"mrr": 0.25}}
# 4 test triples over entities e0..e5 and relations treats (0), r1 (1)
TEST_IDS = np.array([[0, 0, 1], [2, 0, 3], [4, 0, 5], [0, 0, 3]])
RANKS = np.array([2.5, 1.0, 1.0, 3.5])
MODEL_SCORES = np.array([0.9, 0.1, 0.7, 5.0])  # rank 1 twice: test triple 2 (0.7) before 1 (0.1)
SUBSETS = [np.array([0, 1, 2]), np.array([3, 4, 5, 6, 7]), np.array([8, 9]), np.arange(7)]
RELEVANT = [set(), {(2, 1, 3)}, {(4, 1, 0), (0, 1, 5)}, {(0, 1, 1)}]


def figs(mrr, map_):
    return {"mrr": {"mean": mrr}, "map": {"mean": map_}}


REC = {
    "summary": {"tracin": figs(0.25, 0.125), "tracin-margin-path": figs(0.625, 0.5), "random": figs(0.125, 0.0625)},
    "influence": {"loss": "logit", "checkpoints": ["c1", "c2", "c3"]},
}
REC_OTHER = {
    "summary": {"tracin": figs(0.375, 0.25)},
    "influence": {"loss": "score", "checkpoints": ["c1", "c2", "c3"]},
}
NEC = {
    "n_facts": 3,
    "summary": {
        "tracin-margin-path@4": {"delta_hits@1": {"mean": 0.6667}, "delta_mrr": {"mean": 0.5}},
        "far@4": {"delta_hits@1": {"mean": 0.0}, "delta_mrr": {"mean": -0.125}},
    },
}


class World:
    """Stand-ins for every heavy stage, recording their calls in order."""

    def __init__(self, monkeypatch, necessity=NEC, n_checkpoint_files=3):
        from tracegraph.kg.demo import report, synthetic
        from tracegraph.kg.explain import fidelity, necessity as nec_module
        from tracegraph.kg import outputs
        from tracegraph.kg.model import evaluate, train
        from tracegraph.runtime import progress

        self.calls, self.console, self.bars, self.quiet, self.open_bars = [], [], [], 0, []
        self.necessity, self.n_checkpoint_files = necessity, n_checkpoint_files
        self.ctx = None
        times = list(TIMES)
        self.clock = lambda: times.pop(0)
        w = self

        class Console:
            def rule(self, text, **kw):
                w.console.append(("rule", text, kw))

            def print(self, text, **kw):
                w.console.append(("print", text, kw))

        @contextlib.contextmanager
        def quiet():
            w.quiet += 1
            try:
                yield
            finally:
                w.quiet -= 1

        @contextlib.contextmanager
        def make_progress(*args, **kw):
            assert not args and not kw
            bars = Bars()
            w.bars.append(bars)
            w.open_bars.append(bars)
            try:
                yield bars
            finally:
                w.open_bars.remove(bars)

        monkeypatch.setattr(pipeline, "console", Console())
        monkeypatch.setattr(pipeline, "quiet", quiet)
        monkeypatch.setattr(pipeline, "time", SimpleNamespace(perf_counter=self.clock))
        monkeypatch.setattr(progress, "make_progress", make_progress)
        monkeypatch.setattr(synthetic, "generate", self.generate)
        monkeypatch.setattr(synthetic, "write", self.write)
        monkeypatch.setattr(train, "train", self.train)
        monkeypatch.setattr(evaluate, "evaluate", self.evaluate)
        monkeypatch.setattr(fidelity, "prepare", self.prepare)
        monkeypatch.setattr(fidelity, "rank_test", self.rank_test)
        monkeypatch.setattr(fidelity, "compute_tracin", self.compute_tracin)
        monkeypatch.setattr(fidelity, "compute_methods", self.compute_methods)
        monkeypatch.setattr(fidelity, "recovery", self.recovery)
        monkeypatch.setattr(outputs, "explain_files", self.explain_files)
        monkeypatch.setattr(nec_module, "run_necessity", self.run_necessity)
        monkeypatch.setattr(report, "write_report", self.write_report)

    def stage(self):
        """The stage announced last (its rule line), or None before the first."""
        rules = [text for kind, text, _ in self.console if kind == "rule"]
        return rules[-1].split(": ", 1)[1].split("[/]")[0] if rules else None

    def record(self, name, *args, **kw):
        self.calls.append(
            SimpleNamespace(
                name=name, stage=self.stage(), quiet=self.quiet, args=args, kw=kw, threads=torch.get_num_threads()
            )
        )

    def call(self, name):
        (c,) = [c for c in self.calls if c.name == name]
        return c

    # the stand-ins
    def generate(self, gcfg, seed):
        self.record("generate", gcfg, seed=seed)
        return "the graph"

    def write(self, kg, folder):
        self.record("write", kg, folder)
        Path(folder).mkdir(parents=True)
        return dict(COUNTS)

    def train(self, tcfg):
        self.record("train", tcfg)
        ck = Path(tcfg.output_dir) / "checkpoints"
        ck.mkdir(parents=True)
        for i in range(self.n_checkpoint_files):
            (ck / f"epoch_{i}.pt").write_bytes(b"")
        (ck / "resume.json").write_text("{}")  # not a checkpoint

    def prepare(self, fcfg):
        self.record("prepare", fcfg)
        lm = SimpleNamespace(
            model="the model",
            entities=SimpleNamespace(labels=[f"e{i}" for i in range(6)]),
            relations=SimpleNamespace(labels=["treats", "r1"]),
        )
        self.ctx = FidelityContext(
            cfg=fcfg,
            lm=lm,
            train_ids=np.zeros((10, 3), int),
            test_ids=TEST_IDS,
            subsets=SUBSETS,
            relevant=RELEVANT,
            known="the known triples",
        )
        return self.ctx

    def evaluate(self, model, test_ids, known, **kw):
        self.record("evaluate", model, test_ids, known, **kw)
        return METRICS, None

    def rank_test(self, ctx):
        self.record("rank_test", ctx)
        ctx.ranks, ctx.model_scores = RANKS, MODEL_SCORES

    def compute_tracin(self, ctx, progress):
        self.record("compute_tracin", ctx, progress, loss=ctx.cfg.loss, cfg=ctx.cfg)
        assert progress in self.open_bars
        loss = ctx.cfg.loss
        ctx.scores, ctx.influence, ctx.influence_options = [f"scores {loss}"], f"influence {loss}", {"loss": loss}

    def compute_methods(self, ctx, methods, progress):
        self.record("compute_methods", ctx, methods, progress)
        assert progress in self.open_bars
        ctx.extra_keys = {m: f"keys of {m}" for m in methods}

    def recovery(self, ctx):
        self.record("recovery", ctx, loss=ctx.cfg.loss, extra=getattr(ctx, "extra_keys", "unset"), scores=ctx.scores)
        first = [c.name for c in self.calls].count("recovery") == 1
        return json.loads(json.dumps(REC if first else REC_OTHER))

    def explain_files(self, ecfg, rows):
        selected = Path(ecfg.test_triples).read_text()
        self.record("explain_files", ecfg, selected=selected, rows=answered(rows))
        return {}

    def run_necessity(self, ncfg, **kw):
        self.record("run_necessity", ncfg, **kw)
        assert kw["progress"] in self.open_bars
        if isinstance(self.necessity, Exception):
            raise self.necessity
        return json.loads(json.dumps(self.necessity))

    def write_report(self, path, **kw):
        fid_file = Path(path).parent / "fidelity.json"
        on_disk = json.loads(fid_file.read_text()) if fid_file.is_file() else None
        kw["stage_seconds"] = dict(kw["stage_seconds"])  # as it is when the report is written
        self.record("write_report", path, fidelity_json=on_disk, **kw)
        Path(path).write_text("<html></html>")
        return Path(path)


def answered(rows):
    """What a ``rows`` function answers for each test triple's (head, tail) (it raises KeyError for the others)."""
    out = {}
    for h, _, t in TEST_IDS:
        with contextlib.suppress(KeyError):
            out[(int(h), int(t))] = rows(int(h), int(t))
    return out


def rule(i, name, detail):
    return ("rule", f"[bold cyan]stage {i}/8: {name}[/] {detail}", {"align": "left"})


def say(text):
    return ("print", text, {"highlight": False})


def done(name, s):
    return say(f"[green]✓[/] {name} ({s} s)")


def test_documented_defaults_and_sizes():
    assert DemoConfig() == DemoConfig(
        output_dir="demo-output", quick=False, seed=0, n_explain=5, device="cpu", threads=1
    )
    assert STAGES == ["generate", "train", "evaluate", "filter", "explain", "grade", "necessity test", "report"]
    p = preset(False)
    assert (p.graph, p.model, p.epochs, p.checkpoint_every, p.eval_every) == ({}, DEFAULT_MODEL, 100, 10, 5)
    assert (p.learning_rate, p.batch_size, p.label_smoothing, p.loss) == (0.01, 256, 0.0, "logit")
    assert (p.necessity_k, p.necessity_facts, p.necessity_methods) == (4, 30, ("tracin-margin-path", "path"))
    assert p.graded == GRADED
    assert p == Preset()
    q = preset(True)
    assert (q.graph, q.model, q.epochs, q.checkpoint_every, q.eval_every) == ({}, QUICK_MODEL, 20, 5, 5)
    assert (q.learning_rate, q.batch_size, q.label_smoothing, q.loss) == (0.01, 128, 0.1, "logit")
    assert (q.necessity_k, q.necessity_facts, q.necessity_methods) == (4, 30, ("tracin-margin-path", "path"))
    assert q.graded == (*GRADED, "local-retrain")


def expected_console(detail_train, graded, best_ranks="1, 1, 2.5"):
    return [
        rule(1, "generate", "synthetic biomedical graph with planted mechanisms"),
        say("6 entities, 10 train / 1 valid / 4 test triples (test = held-out treats edges)"),
        done("generate", "1.2"),
        rule(2, "train", detail_train),
        done("train", "10.5"),
        rule(3, "evaluate", "filtered ranks of the held-out treats edges (final model)"),
        say(f"test MRR 0.457 (tails 0.500); best tail ranks {best_ranks}"),
        done("evaluate", "0.8"),
        rule(4, "filter", "2-hop training subgraph around every test triple"),
        say("4 subgraphs, 4 training triples on average (max 7) of 10"),
        done("filter", "0.0"),
        rule(5, "explain", "exact TracIn (logit) over 3 checkpoints"),
        done("explain", "3.0"),
        rule(
            6,
            "grade",
            f"ground-truth recovery: {graded} vs baselines (and TracIn with --loss score for comparison)",
        ),
        say("MRR of the mechanism edges: tracin 0.250, tracin-margin-path 0.625, random 0.125; TracIn score 0.375"),
        done("grade", "7.0"),
        rule(7, "necessity test", "remove every top-ranked fact's top-4 at once, retrain once per arm"),
    ]


def test_default_demo_stages_settings_files_and_summary(monkeypatch, tmp_path):
    w = World(monkeypatch)
    out = tmp_path / "deep" / "demo"  # parents made too
    threads_before = torch.get_num_threads()
    cfg = DemoConfig(output_dir=str(out), seed=7, n_explain=3, device="cuda:1", threads=2)
    summary = run_demo(cfg)
    assert torch.get_num_threads() == threads_before
    data, run = out / "data", out / "run"

    # the stages, in order, with the calls each makes
    assert [(c.name, c.stage) for c in w.calls] == [
        ("generate", "generate"),
        ("write", "generate"),
        ("train", "train"),
        ("prepare", "evaluate"),
        ("evaluate", "evaluate"),
        ("rank_test", "evaluate"),
        ("compute_tracin", "explain"),
        ("explain_files", "explain"),
        ("compute_methods", "grade"),
        ("recovery", "grade"),
        ("compute_tracin", "grade"),
        ("recovery", "grade"),
        ("run_necessity", "necessity test"),
        ("write_report", "report"),
    ]
    assert [c.name for c in w.calls if c.quiet] == ["explain_files", "run_necessity"]
    assert {c.threads for c in w.calls} == {2}
    assert w.console == expected_console("ConvE d=64, 100 epochs, checkpoint every 10", ", ".join(GRADED)) + [
        say("ΔH@1 of 3 facts ranked first, top-4 removed: tracin-margin-path 0.67, far 0.00"),
        done("necessity test", "32.0"),
        rule(8, "report", "report.html"),
        done("report", "1.3"),
    ]

    # generation and training
    g = w.call("generate")
    assert g.args[0] == SyntheticConfig() and g.kw == {"seed": 7}
    assert (g.args[0].n_drugs, g.args[0].n_genes, g.args[0].n_diseases, g.args[0].n_test) == (200, 400, 150, 100)
    assert w.call("write").args == ("the graph", data)
    assert w.call("train").args == (
        TrainConfig(
            train=str(data / "train.txt"),
            valid=str(data / "valid.txt"),
            test=str(data / "test.txt"),
            entity_map=str(data / "node_dict.txt"),
            relation_map=str(data / "rel_dict.txt"),
            output_dir=str(run),
            epochs=100,
            batch_size=256,
            learning_rate=0.01,
            label_smoothing=0.0,
            checkpoint_every=10,
            eval_every=5,
            seed=7,
            device="cuda:1",
            model=DEFAULT_MODEL,
            patience=0,
            overwrite=True,
        ),
    )

    # evaluation, explanation and grading
    fcfg = FidelityConfig(
        model_dir=str(run),
        train=str(data / "train.txt"),
        test=str(data / "test.txt"),
        mechanisms=str(data / "mechanisms.tsv"),
        output_dir=str(out),
        loss="logit",
        seed=7,
        removal=False,
        device="cuda:1",
    )
    ctx = w.ctx
    assert w.call("prepare").args == (fcfg,)
    assert w.call("evaluate").args == ("the model", TEST_IDS, "the known triples")
    assert w.call("evaluate").kw == {"device": "cuda:1"}
    assert w.call("rank_test").args == (ctx,)
    first, second = [c for c in w.calls if c.name == "compute_tracin"]
    assert (first.kw["cfg"], second.kw["cfg"]) == (fcfg, replace(fcfg, loss="score"))
    bars = [first.args[1], w.call("compute_methods").args[2], second.args[1], w.call("run_necessity").kw["progress"]]
    assert bars == w.bars and len({id(b) for b in bars}) == 4  # one display per heavy call
    ex = w.call("explain_files")
    assert ex.args == (
        ExplainConfig(
            model_dir=str(run),
            train=str(data / "train.txt"),
            test_triples=str(out / "explanations" / "selected_test.txt"),
            output_dir=str(out / "explanations"),
            loss="logit",
            device="cuda:1",
            node_name_dict=str(data / "node_name_dict.txt"),
        ),
    )
    # the three best: rank 1 (higher model score first), then rank 2.5; each over its own subgraph
    assert ex.kw["selected"] == "e4\ttreats\te5\ne2\ttreats\te3\ne0\ttreats\te1\n"
    assert (out / "explanations" / "selected_test.txt").read_text() == ex.kw["selected"]
    assert ex.kw["rows"].keys() == {(4, 5), (2, 3), (0, 1)}
    assert all(ex.kw["rows"][(h, t)] is SUBSETS[j] for j, (h, _, t) in enumerate(TEST_IDS) if (h, t) in ex.kw["rows"])
    assert w.call("compute_methods").args[1] == GRADED
    rec_main, rec_other = [c for c in w.calls if c.name == "recovery"]
    assert (rec_main.kw["loss"], rec_main.kw["extra"]) == ("logit", {m: f"keys of {m}" for m in GRADED})
    assert (rec_other.kw["loss"], rec_other.kw["extra"], rec_other.kw["scores"]) == ("score", None, ["scores score"])
    # the context is left as the main loss's
    assert ctx.cfg == fcfg and ctx.scores == ["scores logit"]
    assert (ctx.influence, ctx.influence_options) == ("influence logit", {"loss": "logit"})

    # necessity
    assert w.call("run_necessity").args == (
        NecessityConfig(
            model_dir=str(run),
            train=str(data / "train.txt"),
            output_dir=str(out / "necessity"),
            n=30,
            ks=[4],
            methods=["tracin-margin-path", "path"],
            loss="logit",
            sample_seed=7,
            device="cuda:1",
            sides="tail",
        ),
    )

    # fidelity.json (written before the report), the report's arguments, the summary
    fidelity = {
        "model_dir": str(run),
        "train": str(data / "train.txt"),
        "test": str(data / "test.txt"),
        "mechanisms": str(data / "mechanisms.tsv"),
        "recovery": REC,
        "recovery_other_loss": REC_OTHER,
        "necessity": NEC,
    }
    assert json.loads((out / "fidelity.json").read_text()) == fidelity
    rep = w.call("write_report")
    assert rep.args == (out / "report.html",)
    assert rep.kw == dict(
        fidelity_json=fidelity,
        run=run / "final_model.pt",
        device="cuda:1",
        explanations=out / "explanations",
        metrics=METRICS,
        counts=COUNTS,
        fidelity=fidelity,
        marks={
            ("e4", "treats", "e5"): {("e4", "r1", "e0"), ("e0", "r1", "e5")},
            ("e2", "treats", "e3"): {("e2", "r1", "e3")},
            ("e0", "treats", "e1"): set(),
        },
        n_checkpoints=3,
        settings={
            "graph": "default",
            "seed": 7,
            "model": DEFAULT_MODEL,
            "epochs": 100,
            "checkpoint_every": 10,
            "learning_rate": 0.01,
            "label_smoothing": 0.0,
            "tracin_loss": "logit",
            "necessity": "k=4, arms tracin-margin-path, path, neighbour, far",
            "torch_threads": 2,
        },
        stage_seconds=SECONDS,
    )
    expected = {
        "output_dir": str(out),
        "stage_seconds": SECONDS | {"report": 1.33},
        "total_seconds": 69.5,
        "test_metrics": METRICS,
        "recovery_mrr": {"tracin": 0.25, "tracin-margin-path": 0.625, "random": 0.125},
        "recovery_map": {"tracin": 0.125, "tracin-margin-path": 0.5, "random": 0.0625},
        "recovery_mrr_other_loss": 0.375,
        "necessity_delta_hits@1": {"tracin-margin-path@4": 0.6667, "far@4": 0.0},
        "necessity_delta_mrr": {"tracin-margin-path@4": 0.5, "far@4": -0.125},
    }
    assert summary == expected
    assert json.loads((out / "demo_summary.json").read_text()) == expected
    assert list(summary["stage_seconds"]) == STAGES


def test_quick_demo_sizes_and_a_necessity_test_without_facts(monkeypatch, tmp_path):
    w = World(monkeypatch, necessity=DataError("no test triple ranked first"), n_checkpoint_files=3)
    out = tmp_path / "q"
    out.mkdir()  # an existing folder is used as it is
    (out / "keep.txt").write_text("x")
    summary = run_demo(DemoConfig(output_dir=str(out), quick=True, n_explain=1, threads=0))
    assert (out / "keep.txt").read_text() == "x"
    assert {c.threads for c in w.calls} == {1}  # at least one thread
    g = w.call("generate")
    assert g.args[0] == SyntheticConfig.quick() and g.kw == {"seed": 0}
    assert (g.args[0].n_drugs, g.args[0].n_genes, g.args[0].n_diseases, g.args[0].n_test) == (50, 100, 40, 15)
    t = w.call("train").args[0]
    assert (t.model, t.epochs, t.batch_size, t.learning_rate, t.label_smoothing) == (QUICK_MODEL, 20, 128, 0.01, 0.1)
    assert (t.checkpoint_every, t.eval_every, t.seed, t.device, t.patience, t.overwrite) == (5, 5, 0, "cpu", 0, True)
    assert w.call("compute_methods").args[1] == (*GRADED, "local-retrain")
    n = w.call("run_necessity").args[0]
    assert (n.n, n.ks, n.methods, n.sample_seed, n.device, n.sides) == (
        30,
        [4],
        ["tracin-margin-path", "path"],
        0,
        "cpu",
        "tail",
    )
    assert w.call("explain_files").kw["selected"] == "e4\ttreats\te5\n"
    assert w.console == expected_console(
        "ConvE d=32, 20 epochs, checkpoint every 5", ", ".join((*GRADED, "local-retrain")), best_ranks="1"
    ) + [
        say("no test triple ranked first"),
        done("necessity test", "32.0"),
        rule(8, "report", "report.html"),
        done("report", "1.3"),
    ]
    no_facts = {"note": "no test triple ranked first", "summary": {}}
    assert json.loads((out / "fidelity.json").read_text())["necessity"] == no_facts
    rep = w.call("write_report")
    assert rep.kw["fidelity"]["necessity"] == no_facts
    assert rep.kw["settings"]["graph"] == "quick" and rep.kw["settings"]["torch_threads"] == 1
    assert rep.kw["settings"]["model"] == QUICK_MODEL and rep.kw["settings"]["label_smoothing"] == 0.1
    assert rep.kw["marks"] == {("e4", "treats", "e5"): {("e4", "r1", "e0"), ("e0", "r1", "e5")}}
    assert (summary["necessity_delta_hits@1"], summary["necessity_delta_mrr"]) == ({}, {})


def test_threads_are_restored_when_the_demo_fails(monkeypatch, tmp_path):
    before = torch.get_num_threads()
    seen = []

    def failing(cfg):
        seen.append(torch.get_num_threads())
        raise RuntimeError("stage failed")

    monkeypatch.setattr(pipeline, "_run", failing)
    with pytest.raises(RuntimeError, match="stage failed"):
        run_demo(DemoConfig(output_dir=str(tmp_path), threads=3))
    assert seen == [3] and torch.get_num_threads() == before
    monkeypatch.setattr(pipeline, "_run", lambda cfg: {"ok": cfg.threads})
    assert run_demo(DemoConfig(output_dir=str(tmp_path), threads=2)) == {"ok": 2}


def test_other_errors_of_the_necessity_test_are_not_swallowed(monkeypatch, tmp_path):
    w = World(monkeypatch, necessity=ValueError("broken"))
    with pytest.raises(ValueError, match="broken"):
        run_demo(DemoConfig(output_dir=str(tmp_path)))
    assert not (tmp_path / "fidelity.json").exists() and w.quiet == 0


def test_cli_passes_its_options_and_refuses_bad_ones(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(pipeline, "run_demo", lambda cfg: seen.append(cfg) or {"total_seconds": 41.6})
    r = run_cli(
        [
            "demo",
            "-o",
            tmp_path / "d",
            "--quick",
            "--seed",
            "3",
            "--n-explain",
            "2",
            "--device",
            "auto",
            "--threads",
            "4",
        ]
    )
    assert r.exit_code == 0, r.output
    assert seen == [
        DemoConfig(output_dir=str(tmp_path / "d"), quick=True, seed=3, n_explain=2, device="auto", threads=4)
    ]
    assert r.stdout == f"demo finished in 42 s -> {tmp_path / 'd' / 'report.html'}\n"
    run_cli(["demo"])
    assert seen[-1] == DemoConfig(output_dir="demo-output")
    for bad in (["--n-explain", "0"], ["--threads", "0"]):
        run_cli_error(["demo", "-o", tmp_path / "e", *bad], tmp_path, contains=bad[0])
    assert len(seen) == 2


def test_a_score_loss_demo_compares_with_the_logit_loss(monkeypatch, tmp_path):
    w = World(monkeypatch)
    monkeypatch.setattr(pipeline, "preset", lambda quick: replace(Preset(), loss="score"))
    run_demo(DemoConfig(output_dir=str(tmp_path)))
    first, second = [c for c in w.calls if c.name == "compute_tracin"]
    assert (first.kw["loss"], second.kw["loss"]) == ("score", "logit")
    rules = [text for kind, text, _ in w.console if kind == "rule"]
    assert rules[4] == "[bold cyan]stage 5/8: explain[/] exact TracIn (score) over 3 checkpoints"
    assert rules[5].endswith(" vs baselines (and TracIn with --loss logit for comparison)")
    assert (
        say("MRR of the mechanism edges: tracin 0.250, tracin-margin-path 0.625, random 0.125; TracIn logit 0.375")
        in w.console
    )
    assert w.call("explain_files").args[0].loss == "score" and w.call("run_necessity").args[0].loss == "score"
    assert w.call("write_report").kw["settings"]["tracin_loss"] == "score"
    assert w.ctx.cfg.loss == "score"


def test_a_rerun_into_the_same_folder_replaces_the_selection(monkeypatch, tmp_path):
    (tmp_path / "explanations").mkdir()
    (tmp_path / "explanations" / "selected_test.txt").write_text("old\tline\there\n")
    w = World(monkeypatch)
    run_demo(DemoConfig(output_dir=str(tmp_path), n_explain=2))
    assert w.call("explain_files").kw["selected"] == "e4\ttreats\te5\ne2\ttreats\te3\n"
    assert w.call("train").args[0].overwrite is True  # the run is replaced too


def test_help_says_what_quick_and_n_explain_do():
    # the demo grades every test edge and runs no removal test (FidelityConfig(removal=False) above);
    # --quick's graph holds 15 test edges (SyntheticConfig.quick, docs/demo.md)
    text = " ".join(run_cli(["demo", "--help"], terminal_width=200).stdout.split())
    assert "--quick A 4x smaller graph and model (15 held-out test edges; CI: about a minute)." in text
    assert "--n-explain <int range> Best-predicted test edges explained in the report. [default: 5; x>=1]" in text
    assert "removal" not in text and "graded predictions" not in text
