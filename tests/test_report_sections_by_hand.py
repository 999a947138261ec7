"""report/sections.py by hand: the settings, training and test-metrics sections of the run
report, against the HTML written out here and the promises of docs/report.md.

References: expected HTML fragments written out by hand (tables through a small table writer of
this file's own), metrics of hand-made ranks in exact fractions, the training curves' inputs
recorded by a stand-in for the plotting function. The explained triples' section is
test_report_explained_by_hand.py's.
"""

from fractions import Fraction

import pandas as pd
import pytest

from tracegraph.report import sections as S
from tests.report_html import PNG, Recorder, img, tbl


@pytest.fixture
def drawings(monkeypatch):
    rec = {"training_curves": Recorder()}
    for name, r in rec.items():
        monkeypatch.setattr(S, name, r)
    return rec


# ------------------------------------------------------------------ settings


def test_settings_list_every_setting_with_nested_keys_joined_by_dots():
    config = {
        "train": {"epochs": 3, "model": {"embedding_dim": 200}, "optimizer": None, "note": "<b>&"},
        "model": {"embedding_dim": 200, "sub": {"k": 1}},
        "demo": {"model": "kept"},  # only train.model repeats the model's settings
        "empty": {},
        "a<b": None,
        "edge": "z" * 140,
        "long": "y" * 141,
        "sha256": "f96c80343eca191c177f95cfa9" + "0" * 38,
    }
    got = S.settings_section(config, extra={"cli": {"device": "cpu"}, "train": {"epochs": 9}})
    items = [
        ("train.epochs", "9"),  # extra settings replace recorded ones in place
        ("train.optimizer", "—"),
        ("train.note", "&lt;b&gt;&amp;"),
        ("model.embedding_dim", "200"),
        ("model.sub.k", "1"),
        ("demo.model", "kept"),
        ("empty", "{}"),
        ("a&lt;b", "—"),
        # 140 characters are shown whole; a token of 24 characters or more may break anywhere
        ("edge", '<span class="long">' + "z" * 140 + "</span>"),
        # longer values are cut to 140 in the middle (70 + … + 69), the whole value in the title
        ("long", f'<span title="{"y" * 141}"><span class="long">{"y" * 70}…{"y" * 69}</span></span>'),
        ("sha256", '<span class="long">f96c80343eca191c177f95cfa9' + "0" * 38 + "</span>"),
        ("cli.device", "cpu"),
    ]
    assert got.key == "settings"
    assert got.html == (
        "<h2>Settings</h2><p class='note'>From the run's <code>config.json</code>.</p><div class='settings'>"
        + "".join(f"<div><span>{k}</span> {v}</div>" for k, v in items)
        + "</div>"
    )


def test_settings_of_a_run_without_config_say_so_and_extra_settings_alone_are_listed():
    none = "<h2>Settings</h2><p class='note'>This run has no config.json.</p>"
    assert S.settings_section({}).html == none and S.settings_section({}, extra={}).html == none
    assert S.settings_section({}).key == "settings"
    only = S.settings_section({}, extra={"seed": 4})
    assert only.html.endswith("<div class='settings'><div><span>seed</span> 4</div></div>")
    assert S.settings_section({"train": "odd"}).html.endswith("<div><span>train</span> odd</div></div>")


# ------------------------------------------------------------------ training


FULL = {
    "model": {
        "embedding_dim": 200,
        "embedding_height": 10,
        "embedding_width": 20,
        "output_channels": 32,
        "reciprocal": True,
    },
    "train": {
        "epochs": 3,
        "batch_size": 128,
        "optimizer": "adam",
        "learning_rate": 0.003,
        "loss": "b<c&e",
        "training_mode": "1vsAll",
        "label_smoothing": 0.1,
        "seed": 7,
    },
    "source": {"format": "kgx"},
}
FULL_LINE = (
    "<p class='note'>ConvE, embeddings 200 (10×20), 32 channels, reciprocal relations; 3 epochs, batch 128, "
    "adam at learning rate 0.003, loss b&lt;c&amp;e, 1vsAll, label smoothing 0.1, seed 7; imported from kgx.</p>"
)


def test_training_counts_epochs_and_seconds_and_shows_the_best_valid_mrr(drawings):
    history = [
        {"epoch": 1, "loss": 0.9, "seconds": 1.25, "valid": {"mrr": 0.35}},
        {"epoch": 2, "loss": 0.5, "seconds": None, "valid": None},
        {"epoch": 3, "loss": 0.4, "valid": {"mrr": 0.2}},
        {"epoch": 4, "loss": 0.3, "seconds": 2.0, "valid": {"hits@1": 0.1}},
    ]
    got = S.training_section(history, "training loss (bce)", FULL)
    assert got.key == "training"
    assert got.html == (
        f"<h2>Training</h2>{FULL_LINE}{img(PNG, 'training curves')}"
        "<p>4 epochs recorded, 3 s of training; best valid MRR 0.350.</p>"  # 3.25 s; missing seconds count 0
    )
    assert drawings["training_curves"].calls == [((history, "training loss (bce)"), {})]


def test_training_without_validation_or_history_says_so(drawings):
    history = [{"epoch": 1, "loss": 2.0, "seconds": 0.6}, {"epoch": 2, "loss": 1.0, "seconds": 0.9, "valid": {}}]
    got = S.training_section(history)
    assert got.html == (
        f"<h2>Training</h2>{img(PNG, 'training curves')}<p>2 epochs recorded, 2 s of training; no validation recorded.</p>"
    )
    assert drawings["training_curves"].calls == [((history, "training loss"), {})]
    empty = S.training_section([], "x", {"train": {"seed": 1}})
    assert empty.key == "training"
    assert empty.html == (
        "<h2>Training</h2><p class='note'>seed 1.</p><p class='note'>This run records no training history "
        "(an imported model, or one trained elsewhere).</p>"
    )
    assert len(drawings["training_curves"].calls) == 1  # nothing drawn without history


@pytest.mark.parametrize(
    ("config", "line"),
    [
        ({}, ""),
        ({"train": None, "model": None, "source": None}, ""),
        # a phrase needs every one of its settings; reciprocal only when true; seed is read from train
        (
            {
                "model": {"embedding_dim": 8, "embedding_height": 2, "reciprocal": False, "seed": 3},
                "train": {"optimizer": "sgd", "learning_rate": None, "epochs": 0},
            },
            "<p class='note'>0 epochs.</p>",
        ),
        ({"source": {"format": "pykeen"}}, "<p class='note'>imported from pykeen.</p>"),
        ({"model": {"output_channels": 4}, "source": {}}, "<p class='note'>4 channels.</p>"),
        (
            {"model": {"reciprocal": True}, "train": {"label_smoothing": 0.0, "training_mode": "KvsAll"}},
            "<p class='note'>reciprocal relations; KvsAll, label smoothing 0.0.</p>",
        ),
    ],
)
def test_the_settings_line_names_only_what_the_run_records(config, line):
    html = S.training_section([], config=config).html
    assert html == f"<h2>Training</h2>{line}<p class='note'>This run records no training history " + (
        "(an imported model, or one trained elsewhere).</p>"
    )


# ------------------------------------------------------------------ test metrics


def ranks_frame(rows):
    return pd.DataFrame(rows, columns=["head", "relation", "tail", "side", "rank"])


RANKS = ranks_frame(
    [
        ("a", "r1", "b", "tail", 1),
        ("a", "r1", "b", "head", 4),
        ("c", "r1", "d", "tail", 2),
        ("e", "r0", "f", "tail", 1),
        ("e", "r0", "f", "head", 1),
        ("g", "r0", "h", "head", 10),
        ("i", "a<b", "j", "head", 11),
    ]
)


def naive(ranks):
    """MRR, MR, Hits@1/3/10 in exact fractions."""
    n = len(ranks)
    return {
        "count": n,
        "mrr": sum(Fraction(1) / Fraction(r) for r in ranks) / n,
        "mr": Fraction(sum(Fraction(r) for r in ranks)) / n,
        **{f"hits@{k}": Fraction(sum(Fraction(r) <= k for r in ranks), n) for k in (1, 3, 10)},
    }


def test_side_metrics_per_side_and_over_both_against_exact_fractions():
    got = S.side_metrics(RANKS)
    assert list(got) == ["tail", "head", "both"]
    want = {"tail": naive([1, 2, 1]), "head": naive([4, 1, 10, 11]), "both": naive([1, 4, 2, 1, 1, 10, 11])}
    for side in want:
        assert list(got[side]) == ["count", "mrr", "mr", "hits@1", "hits@3", "hits@10"]
        assert got[side]["count"] == want[side]["count"] and isinstance(got[side]["count"], int)
        for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10"):
            assert got[side][k] == pytest.approx(float(want[side][k]), abs=1e-15), (side, k)
            assert type(got[side][k]) is float
    # by hand: a mean rank of 3.5 is outside Hits@3; 3 is inside; a side without ranks is left out
    one = S.side_metrics(ranks_frame([("a", "r", "b", "tail", 3.5), ("a", "r", "c", "tail", 3)]))
    assert list(one) == ["tail", "both"]
    assert one["tail"] == {
        "count": 2,
        "mrr": (1 / 3.5 + 1 / 3) / 2,
        "mr": 3.25,
        "hits@1": 0.0,
        "hits@3": 0.5,
        "hits@10": 1.0,
    }


def f3(x):
    return f"{float(x):.3f}"


def test_metrics_section_overall_per_side_and_per_relation_most_frequent_first():
    got = S.metrics_section(RANKS, "read from <code>ranks.csv</code>", {"r1": "treats", "r0": "r0"})
    sides = [("tail", [1, 2, 1]), ("head", [4, 1, 10, 11]), ("both", [1, 4, 2, 1, 1, 10, 11])]
    overall = []
    for s, r in sides:
        m = naive(r)
        overall.append(
            [
                s,
                str(m["count"]),
                f3(m["mrr"]),
                f"{float(m['mr']):.1f}",
                f3(m["hits@1"]),
                f3(m["hits@3"]),
                f3(m["hits@10"]),
            ]
        )
    assert overall[2] == ["both", "7", "0.563", "4.3", "0.429", "0.571", "0.857"]  # by hand
    per = [  # r0 and r1 both have 3 ranks: by name; a<b has 1
        ["r0", "1", "1.000", "0.550", "0.667", "1.000"],  # rank 10 is inside Hits@10
        ["treats (r1)", "2", "0.750", "0.250", "0.333", "1.000"],
        ["a&lt;b", "1", "—", "0.091", "0.000", "0.000"],  # no tail ranks: its count of ranks
    ]
    assert got.key == "metrics"
    assert got.html == (
        "<h2>Test metrics</h2><p>Filtered ranks (ties: mean rank), read from <code>ranks.csv</code>.</p>"
        + tbl(["side", "ranks", "MRR", "MR", "Hits@1", "Hits@3", "Hits@10"], overall)
        + "<h3>Per relation</h3>"
        + tbl(["relation", "test triples", "MRR tail", "MRR head", "Hits@1", "Hits@10"], per)
    )


def test_metrics_without_ranks_show_only_the_note_on_their_source():
    for ranks in (None, ranks_frame([])):
        got = S.metrics_section(ranks, "The run records no test file: pass <code>--test FILE</code>.")
        assert got.key == "metrics"
        assert got.html == (
            "<h2>Test metrics</h2><p class='note'>The run records no test file: pass <code>--test FILE</code>.</p>"
        )


def per_relation_names(html):
    body = html.split("<h3>Per relation</h3>")[1]
    return [row.split("</td>")[0] for row in body.split("<tr><td>")[1:]]


def test_per_relation_rows_stop_at_the_60_most_frequent_and_say_so():
    rows = [("a", f"r{i:02d}", "b", "tail", 1) for i in range(61)] + [("a", "zz", "c", "tail", 2)] * 2
    got = S.metrics_section(ranks_frame(rows), "x")
    assert per_relation_names(got.html) == ["zz"] + [f"r{i:02d}" for i in range(59)]
    assert got.html.endswith(
        "</table><p class='note'>The 60 most frequent of 62 relations; ranks.csv has them all.</p>"
    )
    head_only = [("a", f"r{i:02d}", "b", "head", 1) for i in range(60)] + [("c", "r00", "d", "head", 1)]
    sixty = S.metrics_section(ranks_frame(head_only), "x")
    assert per_relation_names(sixty.html) == [f"r{i:02d}" for i in range(60)]
    assert sixty.html.endswith("</tbody></table>")
    per = sixty.html.split("<h3>Per relation</h3>")[1]
    assert '<tbody><tr><td>r00</td><td class="num">2</td>' in per  # head ranks only: the count of its ranks


def test_ranks_read_as_text_give_the_same_metrics():
    text = RANKS.astype(str)  # e.g. a ranks.csv read with dtype=str
    assert text["rank"].tolist()[:2] == ["1", "4"]
    assert S.side_metrics(text) == S.side_metrics(RANKS)
    assert S.metrics_section(text, "x", {"r1": "treats"}).html == S.metrics_section(RANKS, "x", {"r1": "treats"}).html


def test_a_relation_ranked_on_one_side_only_shows_a_dash_without_a_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice" on the console
        html = S.metrics_section(ranks_frame([("a", "r", "b", "head", 2)]), "x").html
    assert '<tr><td>r</td><td class="num">1</td><td class="num">—</td><td class="num">0.500</td>' in html
