"""A fresh clone into an empty folder has everything the suite and the README examples read."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (an sdist or a copy): nothing to clone")
    dest = tmp_path_factory.mktemp("fresh") / "tracegraph"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(dest)],
        check=True,
        env=dict(os.environ, GIT_TERMINAL_PROMPT="0"),
        timeout=120,
    )
    return dest


def bundled_globs():
    """The package-data globs pyproject.toml ships, as (package folder, pattern). (Read by hand:
    tomllib is Python >= 3.11, and the section is one ``"package" = ["glob", …]`` line per package.)"""
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    for line in section.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            package, patterns = line.split("=", 1)
            for pattern in json.loads(patterns):
                yield json.loads(package.strip()).replace(".", "/"), pattern


def test_every_bundled_file_is_in_the_clone(clone):
    found = 0
    for folder, pattern in bundled_globs():
        here = sorted(p.relative_to(REPO) for p in (REPO / folder).glob(pattern))
        there = sorted(p.relative_to(clone) for p in (clone / folder).glob(pattern))
        assert here and here == there, f"{folder}/{pattern}: committed {there}, the suite reads {here}"
        for rel in there:
            assert (clone / rel).read_bytes() == (REPO / rel).read_bytes() and (clone / rel).stat().st_size > 0
            found += 1
    assert found >= 3 + 5  # UMLS splits, five neurons


@pytest.mark.slow
def test_the_clone_reads_its_own_data_with_nothing_beside_it(clone):
    code = (
        "from tracegraph.kg.data.datasets import split_paths; from tracegraph.kg.data.triples import read_triples; "
        "from tracegraph.trees.data import read_swc; import pathlib; "
        "p = split_paths('umls'); print(p['train']); print(len(read_triples(p['train']))); "
        "swc = sorted(pathlib.Path('tracegraph/trees/datasets/neurons').glob('*.swc')); "
        "print(len(swc), min(len(read_swc(s).pos) for s in swc))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRAPH_")}
    env.update(PYTHONPATH=str(clone), TRACEGRAPH_CACHE_DIR=str(clone.parent / "cache"))
    out = subprocess.run([sys.executable, "-c", code], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    train_path, n_train, neurons = out.stdout.split("\n")[:3]
    assert train_path.startswith(str(clone)) and n_train == "5216"
    n_files, min_points = neurons.split()
    assert n_files == "5" and int(min_points) > 1000


def test_no_path_outside_the_repository_in_readme_docs_or_code(clone):
    outside = re.compile(r"\.\./shared|/work/shared|shared/data/(umls|neurons)")
    texts = [
        clone / "README.md",
        *(clone / "docs").rglob("*.md"),
        *(clone / "tracegraph").rglob("*.py"),
        *(clone / "benchmarks").rglob("*.py"),
    ]
    hits = [
        f"{p.relative_to(clone)}:{i}"
        for p in texts
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if outside.search(line)
    ]
    assert not hits, hits
