"""The package's entry points by hand: each public name of ``tracegraph`` is the object of the module
the API reference names for it (written out here, not read from the package), unknown names are an
AttributeError word for word, ``dir()`` lists the lazy names, the version is pyproject's, importing
the package loads no torch, and ``tracegraph.kg``'s two helpers open a run on the device asked."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import tracegraph

ROOT = Path(__file__).resolve().parents[1]

# name -> (module, attribute): the reference the docs' API page gives for each public name
WHERE = {
    "open_run": ("tracegraph.kg.api", "open_run"),
    "train": ("tracegraph.kg.api", "train"),
    "import_pykeen": ("tracegraph.kg.api", "import_pykeen"),
    "import_checkpoint": ("tracegraph.kg.api", "import_checkpoint"),
    "Run": ("tracegraph.kg.run", "Run"),
    "Evaluation": ("tracegraph.kg.run", "Evaluation"),
    "IdMap": ("tracegraph.kg.data.idmap", "IdMap"),
    "load_model": ("tracegraph.kg", "load_model"),
    "TracIn": ("tracegraph.kg.explain.tracin.influence", "TracIn"),
    "RunStore": ("tracegraph.kg.model.store", "RunStore"),
}


@pytest.mark.parametrize("name", sorted(WHERE))
def test_each_public_name_is_its_modules_object(name):
    import importlib

    module, attr = WHERE[name]
    assert getattr(tracegraph, name) is getattr(importlib.import_module(module), attr)


def test_errors_is_the_errors_module_and_all_names_the_public_ones():
    import tracegraph.errors as errors

    assert tracegraph.errors is errors
    assert sorted(tracegraph.__all__) == sorted([*WHERE, "__version__"])
    assert {*WHERE, "errors", "__version__"} <= set(dir(tracegraph))
    assert dir(tracegraph) == sorted(dir(tracegraph))


@pytest.mark.parametrize("module", ["tracegraph", "tracegraph.trees"])
def test_an_unknown_name_is_an_attribute_error_naming_it(module):
    import importlib

    with pytest.raises(AttributeError) as e:
        getattr(importlib.import_module(module), "nope")
    assert str(e.value) == f"module '{module}' has no attribute 'nope'"
    assert not hasattr(importlib.import_module(module), "nope")


def test_trees_load_dataset_is_the_labelled_trees_reader():
    import tracegraph.trees
    import tracegraph.trees.labelled as labelled

    assert tracegraph.trees.load_dataset is labelled.load_dataset
    assert tracegraph.trees.__all__ == ["load_dataset"]


def test_the_version_is_the_projects():
    assert tracegraph.__version__ == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_importing_the_package_loads_neither_torch_nor_pandas():
    code = (
        "import sys, tracegraph, tracegraph.trees; print(sorted({'torch', 'pandas', 'torch_geometric'} & set(sys.modules)));"
        "print('tracegraph.errors' in sys.modules, tracegraph.errors.__name__)"  # loaded on first use
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "False tracegraph.errors"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("entry")
    (d / "train.txt").write_text("".join(f"e{i}\tr{i % 2}\te{(i + 1) % 5}\n" for i in range(10)))
    tracegraph.train(
        train=d / "train.txt",
        output_dir=d / "run",
        epochs=1,
        batch_size=4,
        device="cpu",
        model=dict(embedding_dim=12, embedding_height=3, embedding_width=4, output_channels=2),
        quiet=True,
    )
    return d / "run"


def test_kg_load_model_gives_the_runs_model_in_eval_mode(tiny_run):
    import torch

    from tracegraph import kg

    lm = kg.load_model(tiny_run)
    assert not lm.model.training and sorted(lm.entities.labels) == sorted(f"e{i}" for i in range(10))
    assert {p.device for p in lm.model.parameters()} == {torch.device("cpu")}
    meta = kg.load_model(tiny_run / "final_model.pt", device="meta")  # the device asked, not a default
    assert {p.device for p in meta.model.parameters()} == {torch.device("meta")}


def test_kg_open_run_opens_the_run_on_the_device_asked(tiny_run):
    import torch

    from tracegraph import kg

    run = kg.open_run(tiny_run)
    assert isinstance(run, tracegraph.Run) and run.path == tiny_run and run.device == torch.device("cpu")
    assert kg.open_run(tiny_run, device="meta").device == torch.device("meta")
