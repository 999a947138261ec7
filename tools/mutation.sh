#!/usr/bin/env bash
# Mutation testing (mutmut 3) of tracegraph/, as configured in pyproject.toml [tool.mutmut].
# Slow, so not part of CI; results and how to read them: docs/testing.md. Usage, from anywhere:
#   tools/mutation.sh                               every module, in mutation/all/ (hours on 2 cores)
#   tools/mutation.sh tracegraph/kg/data/split.py   one module, against the tests that
#                                                   [tool.tracegraph.mutation.tests] names for it
#   tools/mutation.sh MODULE 'PATTERN'...           only the mutants whose names match (fnmatch),
#                                                   e.g. '*x_rank_queries__mutmut_*'
# The copy's decorated functions are rewritten as plain defs plus an assignment
# (tools/unwrap_decorators.py): mutmut 3 skips decorated functions, properties included.
# One module runs in its own copy, mutation/<module>/ (git-ignored), so several modules' results
# stay side by side; there: `mutmut results` (survivors), `mutmut show NAME` (one diff).
# Environment: PYTHON (default .venv/bin/python), MUTMUT_CHILDREN (parallel mutants, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 TRACEGRAPH_PROGRESS=0 PYTHONHASHSEED=0
PY=${PYTHON:-.venv/bin/python}
[[ $PY == /* ]] || PY=$PWD/$PY   # absolute (not resolved: a venv's python is a symlink)
CHILDREN=${MUTMUT_CHILDREN:-1}
if [ $# -eq 0 ]; then
    rm -rf mutation/all && mkdir -p mutation/all && cp -r tracegraph tests pyproject.toml mutation/all/
    find mutation/all/tracegraph -name '*.py' -not -path '*/cli/*' -exec "$PY" tools/unwrap_decorators.py {} \; >/dev/null
    cd mutation/all
    "$PY" -m mutmut run --max-children "$CHILDREN"
    exec "$PY" -m mutmut results
fi
module=$1
shift
[ -f "$module" ] || { echo "error: $module: no such module (give a path such as tracegraph/kg/data/split.py)" >&2; exit 2; }
work=mutation/$(echo "${module%.py}" | tr / .)
rm -rf "$work"
mkdir -p "$work"
cp -r tracegraph tests "$work"/
echo "unwrapped decorated functions: $("$PY" tools/unwrap_decorators.py "$work/$module")"
"$PY" tools/mutation_config.py "$module" pyproject.toml > "$work/pyproject.toml"
cd "$work"
"$PY" -m mutmut run --max-children "$CHILDREN" "$@" || true   # survivors are a result, not a failure
"$PY" -m mutmut results > results.txt || true
"$PY" - <<'PY'
import json, pathlib
from mutmut.stats import status_by_exit_code  # mutmut's own reading of each mutant's exit code
counts = {}
for meta in pathlib.Path("mutants").rglob("*.meta"):
    for code in json.loads(meta.read_text())["exit_code_by_key"].values():
        status = status_by_exit_code[code]
        if status == "not checked":  # outside the patterns given
            continue
        counts[status] = counts.get(status, 0) + 1
total = sum(counts.values())
killed = counts.get("killed", 0) + counts.get("timeout", 0)  # mutmut counts a timeout as killed
print(json.dumps({"mutants": total, **counts, "score": round(100 * killed / total, 1) if total else None}))
PY
