"""Knowledge-graph datasets by name: UMLS bundled in the package, the larger benchmarks fetched.

>>> sorted(p.name for p in UMLS.glob("*.txt"))
['test.txt', 'train.txt', 'valid.txt']

``dataset_dir(name)`` returns a directory holding ``train.txt``, ``valid.txt`` and ``test.txt``.
Bundled sets live in the package (``tracegraph/kg/data/datasets/<name>/``). Downloaded sets are the
ConvE authors' archives, checked against a pinned sha256 and unpacked into the user cache dir
(``platformdirs`` ``user_cache_dir("tracegraph")``, or ``$TRACEGRAPH_CACHE_DIR``) under a name
that includes the hash, so a changed pin never reuses an old copy. ``source`` points at a local
mirror (a file path or URL) instead of the published address; the checksum is the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracegraph.errors import TracegraphError
from tracegraph.runtime.cachedir import cache_dir

SPLITS = ("train", "valid", "test")
_HERE = Path(__file__).resolve().parent
UMLS = _HERE / "umls"  # the bundled set: train.txt, valid.txt, test.txt
_CONVE_REPO = "https://github.com/TimDettmers/ConvE/raw/master"


@dataclass(frozen=True)
class Dataset:
    """A benchmark dataset tracegraph knows by name.

    Attributes:
        name: Short name (``umls``, ``fb15k-237``...).
        description: One line for ``tracegraph data list``.
        entities: Number of entities.
        relations: Number of relations.
        triples: Train, valid and test triple counts.
        conve_mrr: The published ConvE filtered test MRR, with its source.
        url: Where the archive is downloaded from; None when bundled with the package.
        sha256: The archive's SHA-256 (downloaded sets only).
    """

    name: str
    description: str
    entities: int
    relations: int
    triples: tuple[int, int, int]  # train, valid, test
    conve_mrr: str  # the published ConvE filtered test MRR, with its source
    url: str | None = None  # None: bundled in the package
    sha256: str | None = None

    @property
    def bundled(self) -> bool:
        """Whether the dataset ships inside the package."""
        return self.url is None

    @property
    def source(self) -> str:
        """``"bundled"``, or the download URL."""
        return "bundled" if self.bundled else self.url


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "umls",
            "biomedical concepts (Kok & Domingos 2007), as PyKEEN redistributes it",
            135,
            46,
            (5216, 652, 661),
            "0.94 (ConvE paper)",
        ),
        Dataset(
            "fb15k-237",
            "Freebase, inverse-leakage-free (Toutanova & Chen 2015)",
            14541,
            237,
            (272115, 17535, 20466),
            "0.325 (ConvE paper), 0.339 (LibKGE)",
            f"{_CONVE_REPO}/FB15k-237.tar.gz",
            "311df7930f842a02979eaa7a802484a6afe62303c07f915f1e6edbc30cbe05e8",
        ),
        Dataset(
            "wn18rr",
            "WordNet, inverse-leakage-free (Dettmers et al. 2018)",
            40943,
            11,
            (86835, 3034, 3134),
            "0.43 (ConvE paper), 0.442 (LibKGE)",
            f"{_CONVE_REPO}/WN18RR.tar.gz",
            "1eb9152f804c140d163462c0d49f65e5a0b30ab5fbb375c5e3353c11a6249060",
        ),
    )
}


def lookup(name: str) -> Dataset:
    """The dataset called ``name`` (case and surrounding spaces ignored).

    Args:
        name: The dataset's name.

    Returns:
        Its description.

    Raises:
        TracegraphError: If no dataset has that name.
    """
    key = name.strip().lower()
    if key not in DATASETS:
        raise TracegraphError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)} (`tracegraph data list`)")
    return DATASETS[key]


def cached_path(ds: Dataset) -> Path:
    """The cache directory a downloaded dataset is unpacked into (named by name and checksum).

    Args:
        ds: A downloaded (not bundled) dataset.

    Returns:
        The directory path (it may not exist yet).
    """
    return cache_dir() / "datasets" / f"{ds.name}-{ds.sha256[:16]}"


def dataset_dir(name: str, source: str | None = None) -> Path:
    """The directory with the three split files of dataset ``name``, fetching it when needed.

    Args:
        name: The dataset's name.
        source: A local archive or URL to fetch from instead of the dataset's own URL.

    Returns:
        The directory holding ``train.txt``, ``valid.txt`` and ``test.txt``.

    Raises:
        TracegraphError: If the name is unknown, ``source`` is given for a bundled set, or the
            fetch fails.
        DataError: If the archive is unreadable or lacks a split file.
    """
    ds = lookup(name)
    if ds.bundled:
        if source is not None:
            raise TracegraphError(f"{ds.name} is bundled with tracegraph; --from is only for downloaded sets")
        return _HERE / ds.name
    target = cached_path(ds)
    if all((target / f"{s}.txt").is_file() for s in SPLITS):
        return target
    from tracegraph.kg.data.datasets.fetch import fetch_archive

    fetch_archive(source or ds.url, ds.sha256, target, [f"{s}.txt" for s in SPLITS], label=ds.name)
    return target


def split_paths(name: str, source: str | None = None) -> dict[str, Path]:
    """The paths of the three split files of dataset ``name``, fetching it when needed.

    Args:
        name: The dataset's name.
        source: A local archive or URL to fetch from instead of the dataset's own URL.

    Returns:
        ``{"train": path, "valid": path, "test": path}``.

    Raises:
        TracegraphError: As :func:`dataset_dir`.
    """
    d = dataset_dir(name, source)
    return {s: d / f"{s}.txt" for s in SPLITS}
