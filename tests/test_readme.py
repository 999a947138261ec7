"""The README's Python blocks run as written, on a 1-epoch model (the one substitution below)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# the only change made to the README's code: 100 epochs of d=200 become 1 epoch of a tiny model
TINY = ('epochs=1, checkpoint_every=1, device="cpu", '
        'model={"embedding_dim": 32, "embedding_height": 4, "embedding_width": 8, "output_channels": 4}')


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_readme_has_the_api_blocks():
    blocks = python_blocks()
    assert len(blocks) >= 2
    assert any("tracegraph.open_run" in b for b in blocks)
    assert sum("epochs=100" in b for b in blocks) == 1  # the substitution below has exactly one target


@pytest.mark.slow
def test_readme_python_blocks_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the snippets write runs/umls relative to the working directory
    namespace: dict = {}
    for block in python_blocks():  # one namespace: later blocks use what earlier ones defined, as in a notebook
        exec(compile(block.replace("epochs=100", TINY), str(README), "exec"), namespace)
    assert (tmp_path / "runs" / "umls" / "checkpoints" / "epoch_0001.pt").is_file()
    top, why = namespace["top"], namespace["why"]
    assert top["rank"].tolist() == list(range(1, 11)) and set(top["head"]) == {"steroid"}
    # the default, tracin-margin-path: up to 5 proponents (positive margins) by walk shell (a direct
    # edge counts as 2), then margin; then up to 5 opponents, the most negative margins first
    pro, opp = why[why.Role == "proponent"], why[why.Role == "opponent"]
    keys = list(zip(pro["HeadTailWalk"].clip(lower=2), -pro["MethodScore"]))
    assert list(why.Role) == ["proponent"] * len(pro) + ["opponent"] * len(opp) and 0 < len(pro) <= 5 >= len(opp)
    assert keys == sorted(keys) and (pro["MethodScore"] > 0).all() and (opp["MethodScore"] < 0).all()
    assert opp["MethodScore"].is_monotonic_increasing
    out = capsys.readouterr().out
    assert "135 True" in out  # UMLS has 135 entities
