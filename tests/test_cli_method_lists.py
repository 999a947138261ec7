"""The --method help of explain, fidelity necessity and fidelity recovery lists the methods the
registry holds (tracegraph/kg/explain/methods.py), and a newly registered method appears there
without editing the CLI."""

import re

import pytest

from tests.conftest import run_cli

COMMANDS = [["explain"], ["fidelity", "necessity"], ["fidelity", "recovery"]]


def _method_help(path) -> str:
    res = run_cli([*path, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert res.exit_code == 0, res.output
    text = re.sub(r"(\w)- (\w)", r"\1-\2", " ".join(res.stdout.split()))  # unwrapped, hyphenated names whole
    start = text.index("--method")
    return text[start : start + 700]


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_method_help_lists_what_the_registry_holds(path, monkeypatch, cli_rebuilt):
    from tracegraph.kg.explain import methods

    # a method registered after the CLI was written: the help must name it, with no CLI edit
    monkeypatch.setattr(methods, "METHODS", (*methods.REGISTRY, "shiny-new-method"))
    text = _method_help(path)
    listed = re.search(r"(tracin, .*?shiny-new-method)", text)
    assert listed, text
    names = [n.strip() for n in listed.group(1).split(",")]
    graded = [m for m in methods.REGISTRY if m not in ("degree", "path", "random")]  # recovery grades beside these
    assert names == (
        [*graded, "shiny-new-method"] if path[-1] == "recovery" else [*methods.REGISTRY, "shiny-new-method"]
    )
    assert "{" not in text.split("[default")[0]  # no placeholder left unfilled


def test_explain_method_help_points_to_the_docs_page(monkeypatch):
    text = _method_help(["explain"])
    assert "docs/explaining.md, 'How to choose'" in text and "README" not in text
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs" / "explaining.md"
    assert "## How to choose" in page.read_text(encoding="utf-8")
