"""Rewrite a module's decorated functions so that mutmut mutates them (used by tools/mutation.sh).

mutmut 3 skips every function under a decorator other than ``@staticmethod``/``@classmethod``, so
properties, ``@torch.no_grad()`` functions and context managers would never be mutated. Here each one
becomes a plain ``def`` followed by the same decoration as an assignment,

    @torch.no_grad()                      def rank_queries(...):
    def rank_queries(...):        ->          ...
        ...                               rank_queries = torch.no_grad()(rank_queries)

which Python evaluates the same way (decorators apply bottom-up to the function just defined). A
function whose decorator reads its own name (``@x.setter``) or that is nested in another function is
left as it is. Usage: ``python tools/unwrap_decorators.py FILE`` (rewrites FILE in place; prints the
names it unwrapped).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _unwrappable(node: ast.FunctionDef, parents: list[ast.AST]) -> bool:
    deco = node.decorator_list
    if not deco or any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) for p in parents):
        return False
    if len(deco) == 1 and isinstance(deco[0], ast.Name) and deco[0].id in ("staticmethod", "classmethod"):
        return False  # mutmut handles these itself
    # `@stream.setter` reads the name the def rebinds: the assignment form would read the new function
    return not any(node.name in {n.id for n in ast.walk(d) if isinstance(n, ast.Name)} for d in deco)


def unwrap(source: str) -> tuple[str, list[str]]:
    """The source with its unwrappable decorated functions rewritten, and their names."""
    tree = ast.parse(source)
    found: list[tuple[ast.FunctionDef, list[ast.AST]]] = []

    def visit(node: ast.AST, parents: list[ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef) and _unwrappable(child, parents):
                found.append((child, parents))
            visit(child, [*parents, child])

    visit(tree, [])
    lines = source.splitlines(keepends=True)
    # bottom-up, so earlier line numbers stay valid
    for node, _ in sorted(found, key=lambda f: -f[0].lineno):
        indent = " " * node.col_offset
        wrapped = node.name
        for d in reversed(node.decorator_list):
            wrapped = f"{ast.get_source_segment(source, d)}({wrapped})"
        assert node.end_lineno is not None
        lines.insert(node.end_lineno, f"{indent}{node.name} = {wrapped}\n")
        first = min(d.lineno for d in node.decorator_list)
        del lines[first - 1 : node.lineno - 1]
    return "".join(lines), [n.name for n, _ in found]


if __name__ == "__main__":
    path = Path(sys.argv[1])
    text, names = unwrap(path.read_text(encoding="utf-8"))
    path.write_text(text, encoding="utf-8")
    print(" ".join(names))
