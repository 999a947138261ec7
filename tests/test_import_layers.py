"""The package's layers point one way: every `tracegraph` import (function-local ones included),
read with `ast`, goes from a layer to the same or a lower one, and the module graph has no cycle.

runtime < kg.data < kg.model < kg.explain < {kg.run, kg.api, kg.outputs, kg.predictions, report} < kg.demo < cli;
tracegraph.trees sits above runtime and beside the kg stack (it imports none of it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tracegraph"

LAYERS = [
    ("tracegraph.errors", "tracegraph.runtime"),
    ("tracegraph.kg.data",),
    ("tracegraph.kg.model",),
    ("tracegraph.kg.explain",),
    # the facade and what it writes: the report takes a Run as an argument and imports none of these
    (
        "tracegraph.kg.run",
        "tracegraph.kg.api",
        "tracegraph.kg.outputs",
        "tracegraph.kg.predictions",
        "tracegraph.report",
    ),
    ("tracegraph.kg.demo",),
    ("tracegraph.cli", "tracegraph.__main__"),
]
TREES = "tracegraph.trees"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str, path: Path, modules) -> set[str]:
    """The package modules ``path`` imports anywhere in its body (the longest existing prefix of a name)."""

    def known(dotted: str) -> str:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {known(a.name) for a in node.names if a.name.startswith("tracegraph")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.startswith("tracegraph"):
                out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base) for a in node.names}
    return out - {name, "", "tracegraph"}  # the top package is a lazy re-export of the facade


def layer_of(name: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    return None


def graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def upward_imports(edges) -> list[str]:
    bad = []
    for src, targets in edges.items():
        for dst in targets:
            if src.startswith(TREES):
                ok = dst.startswith(TREES) or layer_of(dst) == 0
            elif dst.startswith(TREES):
                ok = src.startswith("tracegraph.cli")
            else:
                ls, ld = layer_of(src), layer_of(dst)
                ok = ls is None or ld is None or ld <= ls
            if not ok:
                bad.append(f"{src} -> {dst}")
    return sorted(bad)


def cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(root):
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_a_higher_layer():
    assert upward_imports(graph()) == []


def test_the_module_graph_has_no_cycle():
    assert cycles(graph()) == []


def test_function_local_imports_count(tmp_path, monkeypatch):
    """The checker itself: a lower module importing the facade inside a function is caught, and so
    is the cycle it closes."""
    modules = all_modules()
    src = "def f():\n    from tracegraph.kg.run import Run\n    return Run\n"
    p = tmp_path / "x.py"
    p.write_text(src)
    edges = graph()
    edges["tracegraph.kg.model.store"] = edges["tracegraph.kg.model.store"] | imports_of(
        "tracegraph.kg.model.store", p, modules
    )
    assert "tracegraph.kg.model.store -> tracegraph.kg.run" in upward_imports(edges)
    assert any("tracegraph.kg.run" in c and "tracegraph.kg.model.store" in c for c in cycles(edges))


@pytest.mark.parametrize(
    "edge,expected",
    [
        (("tracegraph.trees.train", "tracegraph.kg.model.conve"), False),
        (("tracegraph.trees.train", "tracegraph.runtime.progress"), True),
        (("tracegraph.kg.explain.methods", "tracegraph.kg.model.store"), True),
        (("tracegraph.kg.demo.report", "tracegraph.cli.common"), False),
    ],
)
def test_the_layer_rule_on_single_edges(edge, expected):
    assert (upward_imports({edge[0]: {edge[1]}}) == []) is expected


def test_a_command_module_that_fails_to_import_is_an_error(monkeypatch):
    """`tracegraph --help` must not lose a command silently: registering a command module that cannot
    be imported raises instead of skipping it."""
    import sys

    import tracegraph.cli as cli

    monkeypatch.setitem(sys.modules, "tracegraph.cli.demo", None)  # importing it raises ModuleNotFoundError
    with pytest.raises(ModuleNotFoundError):
        cli._register()
