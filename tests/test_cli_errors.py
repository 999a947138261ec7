"""Every user error the CLI can report: exit code 2, one line ``error: …`` naming the problem,
and no traceback. One tiny trained run serves the commands that need a model.

Option-parsing errors that Click reports itself (``--loss-impl``, ``min=`` bounds) print Click's
usage box instead; they are checked for exit code 2 and the option's name.
"""

import json

import pytest
import torch

from tests.conftest import run_cli

TRIPLES = [("a", "r", "b"), ("b", "r", "c"), ("c", "s", "a"), ("a", "s", "d"), ("d", "r", "b"), ("c", "r", "d")]
TINY_MODEL = [
    "--embedding-dim",
    "6",
    "--embedding-height",
    "2",
    "--embedding-width",
    "3",
    "--output-channels",
    "2",
    "--kernel-size",
    "2",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("clierr")
    (d / "train.txt").write_text("".join("\t".join(t) + "\n" for t in TRIPLES))
    (d / "test.txt").write_text("a\tr\tc\n")
    (d / "unknown.txt").write_text("zz\tr\tqq\n")
    run = d / "run"
    res = run_cli(
        [
            "train",
            "--train",
            d / "train.txt",
            "-o",
            run,
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            *TINY_MODEL,
        ]
    )
    assert res.exit_code == 0, res.output
    (d / "empty_dir").mkdir()
    (d / "a_file").write_text("x")
    return d


def one_line_error(res, *words, after_report=False):
    """The error line; ``after_report``: commands that print per-item results first (filter's
    table) end with it instead of printing it alone."""
    text = res.output.strip()
    assert res.exit_code == 2, text
    assert "Traceback" not in text
    lines = text.splitlines()
    assert [i for i, line in enumerate(lines) if line.startswith("error: ")] == [len(lines) - 1], text
    assert after_report or len(lines) == 1, text
    for w in words:
        assert w in lines[-1], (w, lines[-1])
    return lines[-1]


def train_args(d, *extra, out="out"):
    return ["train", "--train", d / "train.txt", "-o", d / out, "--epochs", "1", "--device", "cpu", *TINY_MODEL, *extra]


def explain_args(d, *extra):
    return [
        "explain",
        "--model-dir",
        d / "run",
        "--train",
        d / "train.txt",
        "--test-triples",
        d / "test.txt",
        "-o",
        d / "expl",
        "--device",
        "cpu",
        *extra,
    ]


# (id, argument builder, words the one error line must contain, output path that must hold no file)
CASES = [
    (
        "training-mode",
        lambda d: train_args(d, "--training-mode", "bogus", out="tm"),
        ["--training-mode", "kvsall"],
        "tm",
    ),
    ("resume-nothing", lambda d: train_args(d, "--resume", out="res"), ["--resume", "does not exist"], None),
    (
        "resume-other-model",
        lambda d: [
            "train",
            "--train",
            d / "train.txt",
            "-o",
            d / "run",
            "--epochs",
            "2",
            "--device",
            "cpu",
            "--resume",
        ],
        ["--resume: --batch-size was 4 in this run, now 128"],
        None,
    ),
    (
        "resume-changed-rate",
        lambda d: [
            "train",
            "--train",
            d / "train.txt",
            "-o",
            d / "run",
            "--epochs",
            "2",
            "--device",
            "cpu",
            "--batch-size",
            "4",
            *TINY_MODEL,
            "--learning-rate",
            "0.01",
            "--resume",
        ],
        ["--learning-rate was 0.003 in this run, now 0.01"],
        None,
    ),
    (
        "old-flag-elsewhere",
        lambda d: train_args(d, "--use-last-layers-only", out="old"),
        ["--use-last-layers-only", "original research scripts", "--layers last:N"],
        "old",
    ),
    (
        "old-flag-no-value",
        lambda d: train_args(d, "--checkpoint-frequency", out="cf"),
        ["--checkpoint-frequency needs a value"],
        "cf",
    ),
    ("device-name", lambda d: train_args(d, "--device", "nonsense", out="dev"), ["--device", "nonsense"], "dev"),
    ("precision-name", lambda d: train_args(d, "--precision", "fp8", out="p8"), ["--precision", "fp8"], "p8"),
    ("fp16-on-cpu", lambda d: train_args(d, "--precision", "fp16", out="p16"), ["fp16", "CUDA"], "p16"),
    (
        "embedding-shape",
        lambda d: ["train", "--train", d / "train.txt", "-o", d / "es", "--embedding-dim", "7", "--device", "cpu"],
        ["--embedding-dim 7"],
        None,
    ),
    ("kernel-size", lambda d: train_args(d, "--kernel-size", "5", out="ks"), ["kernel size 5"], None),
    (
        "train-file-missing",
        lambda d: ["train", "--train", d / "nope.txt", "-o", d / "miss", "--device", "cpu"],
        ["nope.txt", "not found"],
        None,
    ),
    ("method", lambda d: explain_args(d, "--method", "magic"), ["--method", "magic", "tracin"], "expl"),
    ("loss", lambda d: explain_args(d, "--loss", "hinge"), ["--loss", "hinge", "train-loss"], "expl"),
    ("layers-name", lambda d: explain_args(d, "--layers", "conv.weight,nonsense"), ["--layers", "nonsense"], "expl"),
    ("layers-last", lambda d: explain_args(d, "--layers", "last:99"), ["last:N", "last:99"], "expl"),
    ("explain-device", lambda d: explain_args(d, "--device", "nonsense"), ["--device", "nonsense"], "expl"),
    ("devices-empty", lambda d: explain_args(d, "--devices", ","), ["--devices", "at least one device"], "expl"),
    (
        "devices-cuda-index",
        lambda d: explain_args(d, "--devices", f"cuda:{torch.cuda.device_count()}"),
        ["--devices", "does not exist"] if torch.cuda.is_available() else ["CUDA is not available"],
        "expl",
    ),
    (
        "checkpoint-missing",
        lambda d: explain_args(d, "--checkpoints", str(d / "gone.pt")),
        ["gone.pt", "not found"],
        "expl",
    ),
    ("checkpoint-best-missing", lambda d: explain_args(d, "--checkpoints", "best"), ["--checkpoints best"], "expl"),
    (
        "evaluate-empty-model-dir",
        lambda d: ["evaluate", "--model-dir", d / "empty_dir", "--test", d / "test.txt", "--device", "cpu"],
        ["empty_dir", "no best_model.pt"],
        None,
    ),
    (
        "evaluate-device",
        lambda d: ["evaluate", "--model-dir", d / "run", "--test", d / "test.txt", "--device", "x"],
        ["--device", "'x'"],
        None,
    ),
    (
        "report-explanations",
        lambda d: ["report", d / "run", "--explanations", d / "nowhere", "-o", d / "rep.html", "--device", "cpu"],
        ["--explanations", "nowhere"],
        "rep.html",
    ),
    (
        "report-not-html",
        lambda d: ["report", d / "run", "-o", d / "rep.pdf", "--device", "cpu"],
        ["-o", "rep.pdf", ".html"],
        "rep.pdf",
    ),
    ("predict-no-query", lambda d: ["predict", "--model-dir", d / "run", "--device", "cpu"], ["exactly one of"], None),
    (
        "predict-xlsx",
        lambda d: ["predict", "--model-dir", d / "run", "--device", "cpu", "--query", "a", "r", "-o", d / "pred.xlsx"],
        ["-o", "pred.xlsx", ".csv, .tsv or .json"],
        "pred.xlsx",
    ),
    (
        "predict-head-and-tail",
        lambda d: [
            "predict",
            "--model-dir",
            d / "run",
            "--device",
            "cpu",
            "--head",
            "a",
            "--tail",
            "b",
            "--relation",
            "r",
        ],
        ["--relation with --head", "--tail"],
        None,
    ),
    (
        "predict-unknown-relation",
        lambda d: ["predict", "--model-dir", d / "run", "--device", "cpu", "--tail", "b", "--relation", "q"],
        ["relation 'q' is not in the id map"],
        None,
    ),
    (
        "filter-output-is-file",
        lambda d: [
            "filter",
            "--train",
            d / "train.txt",
            "--test-triples",
            d / "train.txt",
            "-o",
            d / "a_file",
            "--no-cache",
        ],
        ["a_file", "not a directory"],
        None,
    ),
    (
        "filter-single-unknown",
        lambda d: [
            "filter",
            "--train",
            d / "train.txt",
            "--test-triples",
            d / "unknown.txt",
            "-o",
            d / "f1.txt",
            "--no-cache",
        ],
        ["unknown.txt:1", "'zz'"],
        "f1.txt",
    ),
    (
        "filter-none-succeeded",
        lambda d: [
            "filter",
            "--train",
            d / "train.txt",
            "--test-triples",
            d / "two_unknown.txt",
            "-o",
            d / "fdir",
            "--no-cache",
        ],
        ["no test triple could be filtered"],
        None,
    ),
    (
        "data-split-fractions",
        lambda d: [
            "data",
            "split",
            d / "train.txt",
            "-o",
            d / "split",
            "--valid-fraction",
            "0.6",
            "--test-fraction",
            "0.6",
        ],
        ["fractions"],
        "split",
    ),
    ("trees-readout", lambda d: ["trees", "pretrain", "--readout", "max", "-o", d / "tr"], ["--readout", "max"], "tr"),
    (
        "trees-accumulation",
        lambda d: [
            "trees",
            "pretrain",
            "--gradient-accumulation-steps",
            "0",
            "--num-trees",
            "2",
            "--max-nodes",
            "12",
            "--device",
            "cpu",
            "-o",
            d / "acc",
        ],
        ["--gradient-accumulation-steps"],
        None,
    ),
    (
        "trees-resume-nothing",
        lambda d: [
            "trees",
            "pretrain",
            "--resume",
            "--num-trees",
            "2",
            "--max-nodes",
            "20",
            "--device",
            "cpu",
            "-o",
            d / "empty_dir",
        ],
        ["--resume", "no checkpoint"],
        None,
    ),
    ("trees-probe-no-encoder", lambda d: ["trees", "probe"], ["--encoder"], None),
    ("trees-study-no-output", lambda d: ["trees", "probe", "--study"], ["--study", "--output-dir"], None),
    (
        "trees-encoder-not-encoder",
        lambda d: [
            "trees",
            "probe",
            "--encoder",
            d / "run" / "final_model.pt",
            "--num-trees",
            "4",
            "--max-nodes",
            "20",
            "--seed",
            "0",
        ],
        ["final_model.pt", "not an encoder checkpoint"],
        None,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_user_errors_are_one_line_with_exit_code_2(files, case):
    _, build, words, not_written = case
    (files / "two_unknown.txt").write_text("zz\tr\tqq\nyy\tr\txx\n")
    one_line_error(run_cli(build(files)), *words, after_report=case[0] == "filter-none-succeeded")
    if not_written:  # (explain creates its output directory before checking its options: it stays empty)
        out = files / not_written
        assert not out.exists() or (out.is_dir() and not any(out.iterdir())), "an output was written before the error"


def test_cuda_requested_without_cuda_is_a_user_error(files, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    one_line_error(run_cli(train_args(files, "--device", "cuda", out="cuda")), "--device cuda", "CUDA is not available")


def test_pretrain_into_an_existing_run_is_refused(files, tmp_path):
    args = [
        "trees",
        "pretrain",
        "--num-trees",
        "2",
        "--max-nodes",
        "12",
        "--epochs",
        "1",
        "--batch-size",
        "2",
        "--hidden-channels",
        "8",
        "--num-interactions",
        "1",
        "--num-rbf",
        "4",
        "--device",
        "cpu",
        "-o",
        tmp_path,
    ]
    assert run_cli(args).exit_code == 0
    history, config = (tmp_path / "history.json").read_text(), (tmp_path / "config.json").read_text()
    one_line_error(run_cli(args), "already holds a run", "--resume")
    assert (tmp_path / "history.json").read_text() == history  # untouched
    finetune = [
        "trees",
        "finetune",
        "--num-trees",
        "2",
        "--max-nodes",
        "12",
        "--epochs",
        "2",
        "--batch-size",
        "2",
        "--hidden-channels",
        "8",
        "--num-interactions",
        "1",
        "--num-rbf",
        "4",
        "--device",
        "cpu",
        "--resume",
        "-o",
        tmp_path,
    ]
    one_line_error(run_cli(finetune), "last.pt", "checkpoint is from 'pretrain', not 'finetune'")
    assert (tmp_path / "history.json").read_text() == history
    assert (tmp_path / "config.json").read_text() == config  # the pretraining run's record is kept


@pytest.mark.parametrize(
    "args, option",
    [
        (["--loss-impl", "turbo"], "--loss-impl"),
        (["--batch-size", "1"], "--batch-size"),
        (["--label-smoothing", "1.5"], "--label-smoothing"),
    ],
)
def test_option_values_click_rejects(files, args, option):
    res = run_cli(train_args(files, *args, out="click"))
    assert res.exit_code == 2 and option in res.output and "Traceback" not in res.output
    assert not (files / "click").exists()


def test_the_trained_fixture_is_a_real_run(files):
    """The errors above are about their options, not a missing or broken run."""
    cfg = json.loads((files / "run" / "config.json").read_text())
    assert cfg["sizes"]["train_triples"] == len(TRIPLES)
    assert (
        run_cli(["evaluate", "--model-dir", files / "run", "--test", files / "test.txt", "--device", "cpu"]).exit_code
        == 0
    )
