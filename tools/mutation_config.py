"""Print pyproject.toml with [tool.mutmut] narrowed to one module and its tests (tools/mutation.sh)."""

import re
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: the same parser as a package
    import tomli as tomllib

module, path = sys.argv[1], sys.argv[2]
text = Path(path).read_text(encoding="utf-8")
tests = tomllib.loads(text)["tool"]["tracegraph"]["mutation"]["tests"].get(module, ["tests/", "-m", "not gpu"])
q = lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]"
text = re.sub(r"^only_mutate = .*?\n", f"only_mutate = {q([module])}\n", text, count=1, flags=re.MULTILINE)
text = re.sub(r"^do_not_mutate = \[.*?\]\n", "", text, count=1, flags=re.MULTILINE | re.DOTALL)
text = re.sub(
    r"^pytest_add_cli_args_test_selection = .*?\n",
    f"pytest_add_cli_args_test_selection = {q(tests)}\n",
    text,
    count=1,
    flags=re.MULTILINE,
)
sys.stdout.write(text)
