"""One self-contained HTML report for any trained run (``tracegraph report``, ``Run.report``).

The page holds the run's settings, training curves, test metrics overall and per relation, each
explained test triple under one legend (its rank, score and competing answer, proponents and
opponents in two tables, whether they are mostly hub triples, a drawing of its training triples
around head and tail), the questions explain could not explain, and a necessity test when one is
given. Images are embedded, text from data is escaped, and nothing is fetched from the network.
The demo writes its page with the same code, adding its own sections (kg/demo/report.py).
"""

from tracegraph.report.build import report_run, report_sections
from tracegraph.report.explanations import ExplainedTriple, read_explanations
from tracegraph.report.html import Section, insert_after, write_page
from tracegraph.report.necessity import read_necessity

__all__ = [
    "ExplainedTriple",
    "Section",
    "insert_after",
    "read_explanations",
    "read_necessity",
    "report_run",
    "report_sections",
    "write_page",
]
