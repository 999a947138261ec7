"""pytest plugin: mutmut's trampolines driven from one warm process (docs/testing.md, "Mutation testing").

Collect once, then run every mutant in a forked child with MUTANT_UNDER_TEST set: all selected
tests in order, stopping at the first failure. Run from the generated ``mutants/`` tree:

    cd mutants && PYTHONPATH=$PWD:../tools MUTRUN_NAMES=names.txt MUTRUN_OUT=out.jsonl MUTRUN_WARM=1 \
      python -m pytest -q --assert=plain -p mutation_fork_plugin -p no:randomly -p no:cacheprovider \
      -p no:xdist -p no:hypothesispytest tests/kg/test_tracin_layers_against_float64.py

env: MUTRUN_NAMES (file of mutant names, from mutants/…/<module>.py.meta), MUTRUN_OUT (jsonl,
appended; names already there are skipped), MUTRUN_LIMIT (seconds, default 60: a timeout counts as
killed, as in mutmut), MUTRUN_WARM (do the clean run in the parent first, so session fixtures are
built once), MUTRUN_FIRST (JSON {function-name part: [node-id parts]}: those tests first),
MUTRUN_DIR (logs of survivors, killing tests; default /tmp/mutrun)."""

import json
import os
import signal
import time

import pytest

_DIR = os.environ.get("MUTRUN_DIR", "/tmp/mutrun")


def _order(name, items):
    """Items that target the mutated function first (faster kills), then all the others."""
    first = json.loads(os.environ.get("MUTRUN_FIRST", "{}"))
    fn = name.rsplit(".", 1)[-1].split("__mutmut_")[0]
    keys = [k for f, ks in first.items() if f in fn for k in ks]
    head = [it for k in keys for it in items if k in it.nodeid]
    seen, out = set(), []
    for it in head + items:
        if id(it) not in seen:
            seen.add(id(it))
            out.append(it)
    return out


def _child(name, items):
    from _pytest.runner import runtestprotocol

    items = _order(name, items)

    fd = os.open(f"{_DIR}/logs/{name}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ["MUTANT_UNDER_TEST"] = name
    try:
        for i, item in enumerate(items):
            nxt = items[i + 1] if i + 1 < len(items) else None
            reps = runtestprotocol(item, nextitem=nxt, log=False)
            for r in reps:
                if r.failed:
                    with open(f"{_DIR}/killers/{name}", "w") as f:
                        f.write(item.nodeid + "\n" + str(r.longrepr)[-3000:])
                    os._exit(1)
    except BaseException as e:  # noqa: BLE001
        with open(f"{_DIR}/killers/{name}", "w") as f:
            f.write(f"<runner> {e!r}")
        os._exit(3)
    os._exit(0)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    import torch

    torch.set_num_threads(1)
    names = [n.strip() for n in open(os.environ["MUTRUN_NAMES"]) if n.strip()]
    out_path = os.environ["MUTRUN_OUT"]
    limit = float(os.environ.get("MUTRUN_LIMIT", "60"))
    done = set()
    if os.path.exists(out_path):
        done = {json.loads(line)["name"] for line in open(out_path)}
    os.makedirs(f"{_DIR}/logs", exist_ok=True)
    os.makedirs(f"{_DIR}/killers", exist_ok=True)
    items = list(session.items)
    if os.environ.get("MUTRUN_WARM"):  # the clean run, in this process: session fixtures stay set up
        from _pytest.runner import runtestprotocol

        os.environ["MUTANT_UNDER_TEST"] = ""
        for i, item in enumerate(items):
            nxt = items[i + 1] if i + 1 < len(items) else items[0]
            for r in runtestprotocol(item, nextitem=nxt, log=False):
                if r.failed:
                    raise SystemExit(f"clean run fails: {item.nodeid}\n{r.longrepr}")
        del os.environ["MUTANT_UNDER_TEST"]
        print(f"clean run passed: {len(items)} tests", flush=True)
    with open(out_path, "a") as out:
        for name in names:
            if name in done:
                continue
            t0 = time.time()
            pid = os.fork()
            if pid == 0:
                _child(name, items)
            status = None
            while True:
                wpid, st = os.waitpid(pid, os.WNOHANG)
                if wpid:
                    code = os.waitstatus_to_exitcode(st)
                    status = "survived" if code == 0 else "killed"
                    break
                if time.time() - t0 > limit:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    status, code = "timeout", None
                    break
                time.sleep(0.02)
            killer = ""
            kp = f"{_DIR}/killers/{name}"
            if os.path.exists(kp):
                killer = open(kp).readline().strip()
            out.write(
                json.dumps(
                    {"name": name, "status": status, "code": code, "t": round(time.time() - t0, 2), "killer": killer}
                )
                + "\n"
            )
            out.flush()
            if status != "survived":
                try:
                    os.remove(f"{_DIR}/logs/{name}.log")
                except OSError:
                    pass
    return True
