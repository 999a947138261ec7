"""The dataset registry (kg/data/datasets/__init__.py) by hand: names, where a downloaded set is
cached, the refusals word for word, and what a fetch is asked for.

References: the registry's published names and checksums, and the cache layout the docstrings state.
"""

import pytest

import tracegraph.kg.data.datasets as datasets
from tracegraph.errors import TracegraphError


def test_names_are_case_and_space_blind_and_unknown_ones_list_the_known():
    assert datasets.lookup(" UMLS ").name == "umls" and datasets.lookup("FB15k-237").name == "fb15k-237"
    with pytest.raises(TracegraphError) as e:
        datasets.lookup("nope")
    assert str(e.value) == "unknown dataset 'nope'; known: umls, fb15k-237, wn18rr (`tracegraph data list`)"


def test_a_downloaded_set_is_cached_under_its_name_and_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path))
    ds = datasets.lookup("wn18rr")
    assert datasets.cached_path(ds) == tmp_path / "datasets" / "wn18rr-1eb9152f804c140d"


def test_a_bundled_set_takes_no_source():
    with pytest.raises(TracegraphError) as e:
        datasets.dataset_dir("umls", source="elsewhere.tar.gz")
    assert str(e.value) == "umls is bundled with tracegraph; --from is only for downloaded sets"


def test_a_fetch_is_asked_for_the_splits_under_the_sets_name(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_CACHE_DIR", str(tmp_path))
    asked = []
    import tracegraph.kg.data.datasets.fetch as fetch

    monkeypatch.setattr(fetch, "fetch_archive", lambda *a, **k: asked.append((a, k)))
    ds = datasets.lookup("fb15k-237")
    datasets.dataset_dir("fb15k-237", source="/mirror/FB15k-237.tar.gz")
    ((args, kwargs),) = asked
    assert args == (
        "/mirror/FB15k-237.tar.gz",
        ds.sha256,
        tmp_path / "datasets" / "fb15k-237-311df7930f842a02",
        ["train.txt", "valid.txt", "test.txt"],
    )
    assert kwargs == {"label": "fb15k-237"}


def test_the_source_is_bundled_or_the_download_address():
    assert datasets.lookup("umls").source == "bundled" and datasets.lookup("umls").bundled
    for name, archive in (("fb15k-237", "FB15k-237"), ("wn18rr", "WN18RR")):
        ds = datasets.lookup(name)
        assert not ds.bundled
        assert ds.source == f"https://github.com/TimDettmers/ConvE/raw/master/{archive}.tar.gz"
