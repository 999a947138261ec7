"""Filtering the training graph around a test triple.

See docs/design.md; full semantics and the reasoning behind the path algorithm: docs/filtering.md.

Undirected multigraph of training triples; nodes within ``n_hops`` of the head *and* of the
tail (plus both); triples with both ends there, kept if they touch head/tail or an endpoint has
degree >= ``min_degree`` (distinct neighbours, full graph, no self-loops); optionally only those
on a simple head–tail path of length <= L; optionally one triple per node pair. All of it runs on
one CSR index (:class:`GraphIndex`), built once per training graph and cached as ``.npz``.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tracegraph.errors import TracegraphError, require_file
from tracegraph.kg.explain.paths import bfs, gather, may_be_on_path, path_edges
from tracegraph.runtime.checkpoints import atomic_path
from tracegraph.runtime.progress import log

INDEX_FORMAT_VERSION = 1
INDEX_SUFFIX = ".tgindex.npz"


@dataclass(frozen=True)
class FilterOptions:
    """How the training graph is filtered around a test triple.

    Attributes:
        n_hops: Keep nodes within this many hops of the head and of the tail.
        min_degree: Keep a triple only if an endpoint has at least this many distinct neighbours
            (or it touches the head or tail, with ``preserve_test_edges``).
        preserve_test_edges: Always keep triples touching the test head or tail.
        strict_hop: Measure hop distances with the direct head-tail edges removed.
        path_filtering: Keep only triples on a simple head-tail path of length at most
            ``max_path_length``.
        max_path_length: The path length bound.
        strict_path: Path filtering over the whole n-hop subgraph, ignoring the degree rule.
        edges_only: Keep one triple (the first) per node pair.

    Raises:
        TracegraphError: If a count is negative or the path length below 1.
    """

    n_hops: int = 2
    min_degree: int = 2
    preserve_test_edges: bool = True
    strict_hop: bool = False
    path_filtering: bool = False
    max_path_length: int = 3
    strict_path: bool = False
    edges_only: bool = False

    def __post_init__(self):
        if self.n_hops < 0:
            raise TracegraphError(f"--n-hops must be >= 0, got {self.n_hops}")
        if self.min_degree < 0:
            raise TracegraphError(f"--min-degree must be >= 0, got {self.min_degree}")
        if self.uses_paths and self.max_path_length < 1:
            raise TracegraphError(f"--max-total-path-length must be >= 1, got {self.max_path_length}")

    @property
    def uses_paths(self) -> bool:
        """Whether path filtering applies (``strict_path`` implies it)."""
        # --strict-path-filtering implies path filtering: asking for it alone is unambiguous
        return self.path_filtering or self.strict_path


@dataclass
class FilterResult:
    """The training triples kept around one test triple.

    Attributes:
        head: The test head id.
        tail: The test tail id.
        triple_rows: Sorted int64 rows of the kept training triples.
        hop_nodes: Size of the n-hop node set (head and tail included).
        nodes_kept: Distinct entities in the kept triples.
        edges_kept: Number of kept triples.
        total_edges: Number of training triples.
        seconds: Time taken.
    """

    head: int
    tail: int
    triple_rows: np.ndarray  # sorted int64 rows of the training triples that are kept
    hop_nodes: int  # size of the n-hop node set (incl. head and tail)
    nodes_kept: int  # distinct entities in the kept triples
    edges_kept: int
    total_edges: int
    seconds: float

    @property
    def kept_fraction(self) -> float:
        """The share of training triples kept (0 for an empty graph)."""
        return self.edges_kept / self.total_edges if self.total_edges else 0.0

    @property
    def reduction_ratio(self) -> float:
        """Fraction of the training triples removed (0.99 = 99 % fewer triples)."""
        return 1.0 - self.kept_fraction

    def stats(self) -> dict:
        """The numbers to report (not the rows, nor head/tail, which the caller labels)."""
        d = {k: v for k, v in asdict(self).items() if k not in ("triple_rows", "head", "tail")}
        d.update(kept_fraction=self.kept_fraction, reduction_ratio=self.reduction_ratio)
        return d


# --------------------------------------------------------------------------- the index


class GraphIndex:
    """The training graph as CSR arrays, built once and reused for every test triple.

    ``adj_indptr/adj_indices``: simple undirected adjacency (distinct neighbours, no self-loops),
    used for hop distances and degrees. ``head_ptr/row_by_head``: training-triple rows grouped
    by head entity, so the triples inside a node set are found without scanning all of them.
    """

    ARRAYS = ("adj_indptr", "adj_indices", "head_ptr", "row_by_head")

    def __init__(self, heads, tails, num_entities, adj_indptr, adj_indices, head_ptr, row_by_head):
        self.heads = np.ascontiguousarray(heads)
        self.tails = np.ascontiguousarray(tails)
        self.num_entities = int(num_entities)
        self.adj_indptr, self.adj_indices = adj_indptr, adj_indices
        self.head_ptr, self.row_by_head = head_ptr, row_by_head
        self.degree = np.diff(adj_indptr)
        self.loaded_from: Path | None = None  # set when the arrays came from a cache file

    @property
    def num_triples(self) -> int:
        """Number of training triples."""
        return len(self.heads)

    # ---------------------------------------------------------------- build / cache

    @classmethod
    def build(cls, ids: np.ndarray, num_entities: int) -> "GraphIndex":
        """Build the index of a training graph.

        Args:
            ids: Training triples ``[N, 3]``.
            num_entities: Number of entities.

        Returns:
            The index.
        """
        heads, tails = _endpoints(ids, num_entities)
        n = int(num_entities)
        loop = heads == tails
        a = np.concatenate([heads[~loop], tails[~loop]]).astype(np.int64)
        b = np.concatenate([tails[~loop], heads[~loop]]).astype(np.int64)
        key = a * n + b
        del a, b
        key.sort()  # in place: dedupe parallel triples / both directions by one sort
        if key.size:
            key = key[np.concatenate([[True], key[1:] != key[:-1]])]
        adj_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(key // n, minlength=n), out=adj_indptr[1:])
        adj_indices = (key % n).astype(_index_dtype(n))
        del key
        row_by_head = np.argsort(heads, kind="stable").astype(_index_dtype(len(heads)))
        head_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(heads, minlength=n), out=head_ptr[1:])
        return cls(heads, tails, n, adj_indptr, adj_indices, head_ptr, row_by_head)

    @classmethod
    def load_or_build(
        cls, train_path: str | Path, ids: np.ndarray, num_entities: int, use_cache: bool = True
    ) -> "GraphIndex":
        """Reuse the index cached in the user cache dir when it was built from the same file bytes and ids.

        The key is sha256(file bytes) + format version + a digest of the id arrays (the same file read
        with another entity map gives other ids), and names the cache file, so nothing is ever written
        beside the user's data. An unreadable cache is rebuilt; an unwritable cache dir means no cache.

        Args:
            train_path: The training file ``ids`` were read from.
            ids: Training triples ``[N, 3]``.
            num_entities: Number of entities.
            use_cache: Read and write the cache.

        Returns:
            The index.

        Raises:
            DataError: If the training file does not exist.
        """
        require_file(train_path, "training file")
        if not use_cache:
            return cls.build(ids, num_entities)
        heads, tails = _endpoints(ids, num_entities)
        key = _cache_key(train_path, heads, tails, num_entities)
        candidates = cache_paths(key)
        for path in candidates:
            idx = cls._try_load(path, key, heads, tails, num_entities)
            if idx is not None:
                return idx
        t0 = time.perf_counter()
        idx = cls.build(ids, num_entities)
        log.debug(f"built graph index in {time.perf_counter() - t0:.2f} s")
        for path in candidates:
            try:
                idx.save(path, key)
                log.debug(f"graph index cached at {path}")
                break
            except OSError as e:
                log.info(f"cannot write graph index cache {path} ({e.strerror or e})")
        else:
            log.info("graph index not cached (no writable location); it is rebuilt on every run")
        return idx

    def save(self, path: str | Path, key: str) -> None:
        """Write the index with its cache key as an ``.npz`` file, atomically.

        Args:
            path: The destination file.
            key: The cache key (see :meth:`load_or_build`).
        """
        arrays = {name: getattr(self, name) for name in self.ARRAYS}
        with atomic_path(path) as tmp, open(tmp, "wb") as f:  # file object: savez adds no suffix
            np.savez(f, key=np.array(key), **arrays)

    @classmethod
    def _try_load(cls, path: Path, key: str, heads, tails, n) -> "GraphIndex | None":
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["key"]) != key:
                    log.info(f"graph index cache {path} is stale (training file or ids changed); rebuilding")
                    return None
                arrays = {name: z[name] for name in cls.ARRAYS}
        except Exception as e:  # noqa: BLE001 - a damaged cache is rebuilt, never fatal
            log.info(f"graph index cache {path} unreadable ({e}); rebuilding")
            return None
        idx = cls(heads, tails, n, **arrays)
        idx.loaded_from = path
        return idx

    # ---------------------------------------------------------------- filtering

    def filter(self, head: int, tail: int, options: FilterOptions = FilterOptions()) -> FilterResult:
        """Filter the training graph around one test triple.

        Args:
            head: The test head id.
            tail: The test tail id.
            options: The filter settings.

        Returns:
            The kept triples and counts.

        Raises:
            TracegraphError: If ``head`` or ``tail`` is not an entity of the graph.
        """
        t0 = time.perf_counter()
        n, o = self.num_entities, options
        for name, x in (("head", head), ("tail", tail)):
            if not 0 <= int(x) < n:
                raise TracegraphError(f"{name} id {x} is not an entity of the training graph (0..{n - 1})")
        h, t = int(head), int(tail)
        cut = (h, t) if o.strict_hop else None
        dh = bfs(self.adj_indptr, self.adj_indices, h, o.n_hops, n, cut)
        dt = bfs(self.adj_indptr, self.adj_indices, t, o.n_hops, n, cut)
        in_set = (dh >= 0) & (dt >= 0)
        in_set[[h, t]] = True
        nodes = np.flatnonzero(in_set)
        rows = self._rows_inside(in_set, nodes)  # the n-hop subgraph
        u, v = self.heads[rows], self.tails[rows]
        if o.uses_paths:
            # Hop distances (full graph, or without the h–t edges, which no other simple h–t path
            # uses) bound those in any subgraph from below: prune what cannot lie on a short path.
            near = may_be_on_path(u, v, dh, dt, o.n_hops, o.max_path_length)
        if o.strict_path:
            keep = np.zeros(len(rows), dtype=bool)
            keep[near] = path_edges(u[near], v[near], h, t, o.max_path_length)
        else:
            touches = (u == h) | (u == t) | (v == h) | (v == t)
            keep = (self.degree[u] >= o.min_degree) | (self.degree[v] >= o.min_degree)
            if o.preserve_test_edges:
                keep |= touches
            if o.path_filtering:
                sub = np.flatnonzero(keep & near)
                keep[:] = False
                keep[sub] = path_edges(u[sub], v[sub], h, t, o.max_path_length)
        rows, u, v = rows[keep], u[keep], v[keep]
        if o.edges_only and rows.size:
            pair = np.minimum(u, v).astype(np.int64) * n + np.maximum(u, v)
            _, first = np.unique(pair, return_index=True)  # rows are sorted: first = lowest row
            first.sort()
            rows, u, v = rows[first], u[first], v[first]
        seen = np.zeros(n, dtype=bool)  # a mask, not np.unique: O(n + m) even for hub-sized sets
        seen[u] = True
        seen[v] = True
        nodes_kept = int(np.count_nonzero(seen))
        return FilterResult(
            h, t, rows, int(nodes.size), nodes_kept, int(rows.size), self.num_triples, time.perf_counter() - t0
        )

    def _rows_inside(self, in_set: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Sorted rows of the triples with both ends in ``in_set``.

        Small sets: gather the rows of their heads (cost ~ their triples). Sets touching a large
        share of the graph (hubs within n hops): one scan of all triples, already sorted.
        """
        counts = self.head_ptr[nodes + 1] - self.head_ptr[nodes]
        if counts.sum() > self.num_triples // 8:
            return np.flatnonzero(in_set[self.heads] & in_set[self.tails])
        rows = gather(self.head_ptr, self.row_by_head, nodes).astype(np.int64)
        return np.sort(rows[in_set[self.tails[rows]]])


def _index_dtype(n: int):
    return np.int32 if n < 2**31 - 1 else np.int64


def _endpoints(ids: np.ndarray, num_entities: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.asarray(ids)
    if ids.ndim != 2 or ids.shape[1] != 3:
        raise TracegraphError(f"triples must be an [M, 3] array of ids, got shape {ids.shape}")
    if ids.size and (ids[:, [0, 2]].min() < 0 or ids[:, [0, 2]].max() >= num_entities):
        raise TracegraphError(f"entity ids must lie in 0..{num_entities - 1}")
    dt = _index_dtype(num_entities)
    return ids[:, 0].astype(dt), ids[:, 2].astype(dt)


def _cache_key(train_path, heads, tails, n) -> str:
    h = hashlib.sha256()
    with open(train_path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    ids = hashlib.sha256(np.ascontiguousarray(heads).tobytes())
    ids.update(np.ascontiguousarray(tails).tobytes())
    return f"v{INDEX_FORMAT_VERSION}:{h.hexdigest()}:{n}:{ids.hexdigest()[:16]}"


def cache_paths(key: str) -> list[Path]:
    """Where the index of content ``key`` may be cached: the user cache dir only (never beside the data).

    Args:
        key: The cache key.

    Returns:
        Candidate cache files.
    """
    from tracegraph.runtime.cachedir import cache_dir

    return [cache_dir() / "index" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}{INDEX_SUFFIX}"]
