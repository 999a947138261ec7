#!/usr/bin/env bash
# Mutation testing of the core modules listed in pyproject.toml [tool.mutmut] (mutmut 3).
# Slow, so not part of CI. Usage, from anywhere:
#   tools/mutation.sh                          every core module
#   tools/mutation.sh 'tracegraph.kg.model.loss*'    one module (mutant-name glob)
# Then: `mutmut results` (survivors), `mutmut show NAME` (one diff). Results: docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 TRACEGRAPH_PROGRESS=0 PYTHONHASHSEED=0
PY=${PYTHON:-.venv/bin/python}
"$PY" -m mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@"
"$PY" -m mutmut results
