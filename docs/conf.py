"""Sphinx configuration: Markdown pages (MyST), the API from docstrings, the CLI from the Typer app."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "_ext")]  # this checkout's package, then the CLI mirror

import tracegraph  # noqa: E402

project = "tracegraph"
author = "tracegraph contributors"
copyright = "tracegraph contributors, MIT licence"
release = version = tracegraph.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "sphinx_click",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_ext", "tune-umls-space.json"]
root_doc = "index"
smartquotes = False  # keep `--option` and quotes as typed (an en dash is not a flag)

myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links resolve, and a broken one fails the build

napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
# type hints name third-party classes Sphinx cannot link without intersphinx (the build is offline)
nitpicky = False

html_theme = "furo"
html_title = f"tracegraph {release}"
html_static_path = ["_static"]

# `sphinx -b doctest` runs the examples of the pages and of the docstrings autodoc pulls in. They
# use RUN_DIR: a 2-epoch tiny UMLS run (as tests/kg/test_run_api.py's), trained once per build.
doctest_global_setup = """
import os, tempfile
if "TRACEGRAPH_DOCTEST_RUN" not in os.environ:
    import tracegraph
    from tracegraph.kg.data.datasets import UMLS
    _out = os.path.join(tempfile.mkdtemp(prefix="tracegraph-doctest-"), "run")
    tracegraph.train(train=UMLS / "train.txt", valid=UMLS / "valid.txt", test=UMLS / "test.txt", output_dir=_out, epochs=2, checkpoint_every=1,
                     device="cpu", model={"embedding_dim": 32, "embedding_height": 4, "embedding_width": 8,
                                          "output_channels": 4})
    os.environ["TRACEGRAPH_DOCTEST_RUN"] = _out
RUN_DIR = os.environ["TRACEGRAPH_DOCTEST_RUN"]
from tracegraph import open_run
from tracegraph.kg.data.idmap import IdMap
"""
doctest_default_flags = __import__("doctest").ELLIPSIS


# The influence object (``tracegraph.TracIn``) is documented where the package provides it.
TRACIN_SECTION = """
## The influence itself

`tracegraph.TracIn` holds the train×test influence for your own analyses: `.influence(test)`
is the [tests × training triples] array, `.top_k(test, k)` the proponents and opponents of one
test triple, `.self_influence()` each training triple's own.

```{eval-rst}
.. autoclass:: tracegraph.TracIn
   :members:
```
"""


def _add_tracin_section(app, docname, source):
    if docname == "api" and "TracIn" in getattr(tracegraph, "__all__", ()):
        source[0] = source[0].replace("<!-- tracin-object:", TRACIN_SECTION + "\n<!-- tracin-object:", 1)


# The faithfulness page's side-by-side figure, drawn at every build from the committed results files
# (as its tables are), so it never drifts from them; the file itself is not committed.
SIDE_BY_SIDE_FIGURE = "_static/generated/side-by-side.png"


def draw_side_by_side(out: Path = HERE / SIDE_BY_SIDE_FIGURE) -> None:
    from tracegraph.kg.explain.compare_page import load_page_results, page_marks, page_panels
    from tracegraph.report.plots import necessity_forest

    results = load_page_results(HERE.parent / "benchmarks" / "results")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(necessity_forest(page_panels(results), page_marks(results)))


def setup(app):
    app.connect("source-read", _add_tracin_section)
    app.connect("builder-inited", lambda app: draw_side_by_side())
