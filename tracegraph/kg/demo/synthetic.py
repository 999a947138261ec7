"""A generated biomedical knowledge graph with planted drug mechanisms (demo, tests, fidelity).

The generative story, in the order the code follows it:

1. **Entities.** Drugs (``CHEBI:``), genes (``NCBIGene:``), pathways (``REACT:R-HSA-``),
   diseases (``MONDO:``) and phenotypes (``HP:``), each with a readable name and a Biolink
   category. Every entity gets a hidden *popularity* (Zipf: rank^-zipf_exponent, ranks
   shuffled), the way a few genes (TP53, TNF) and diseases dominate real graphs, and belongs to
   one of ``n_modules`` latent *disease modules* (biological processes; the "disease module"
   hypothesis: a disease's genes cluster in the same pathways and interaction neighbourhoods).
2. **Background biology.** For each relation schema (``SCHEMAS``), every entity of the *driver*
   type draws about ``k`` partners (k = minimum + Poisson; e.g. each gene participates in ~2
   pathways, each disease has ~5 phenotypes, each drug affects ~2.5 genes). A partner comes
   from the driver's own module with probability ``module_coherence``, else from anywhere, and
   in both cases in proportion to popularity: preferential attachment, hence a heavy-tailed
   degree distribution. Drugs reach only the *druggable* genes (``druggable_fraction`` of them,
   as drugs in practice hit a minority of the genome), so several drugs share each target.
   Every entity type drives some schema, so no entity is isolated.
3. **Planted treatments.** A drug treats a disease *because* one of its mechanisms reaches it,
   as in DrugMechDB: each drug draws ~``treats_per_drug`` walks, each one from the drug along
   background edges (never noise) following a mechanism template (``TEMPLATES``, 2-4 edges,
   chosen by ``template_weights``); the disease it ends at is treated (a pair reached twice
   counts once). The first step picks one of the drug's targets uniformly; every later step
   takes, with probability ``mechanism_reuse``, the node's *dominant* continuation (its most
   salient matching neighbour, a hidden per-entity draw, the same for every walk), else a
   uniform one. So drugs sharing a target mostly share its mechanisms and diseases (as drugs of
   one target class share indications), and each mechanism recurs across drugs. The walk's
   edges are the ground truth; a pair reached by several walks keeps all of them. Modules make
   mechanisms converge: a drug's targets, their pathways and partners mostly lead to the few
   diseases of the same module.
4. **Noise.** Spurious edges between uniformly random entities of plausible types
   (``noise_edge_fraction`` of the background) and treats edges without any mechanism
   (``noise_treats_fraction`` of the planted ones, diseases by popularity; train only).
5. **Splits.** ``n_test`` planted treats edges form the test set and ``n_valid_treats`` go to
   valid, with ``n_valid_other`` non-treats edges that lie on no planted mechanism and whose
   removal leaves both ends in train. Mechanism edges are never held out, so every held-out
   treats edge can be inferred from train, and the same templates produce the training treats.

Knobs: harder with lower ``module_coherence`` (0 = mechanisms end at near-random diseases),
lower ``mechanism_reuse`` or a larger ``druggable_fraction`` (fewer drugs share a mechanism),
more noise, larger ``zipf_exponent`` (hubs drown specific paths) or fewer ``treats_per_drug``
(fewer examples per template); easier the other way round. The defaults are the demo's graph,
chosen so that a small ConvE ranks most held-out treats edges near the top (docs/demo.md):
real graphs are noisier and less modular than this.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tracegraph.errors import TracegraphError
from tracegraph.kg.demo.mechanisms import (
    AFFECTS,
    GENE_CONDITION,
    GENE_PHENOTYPE,
    HAS_PHENOTYPE,
    INTERACTS,
    PARTICIPATES,
    PATHWAY_DISEASE,
    SIDE_EFFECT,
    SUBCLASS,
    TEMPLATES,
    TREATS,
    MechanismPath,
    Triple,
    plant_treatments,
)
from tracegraph.kg.demo.synthetic_names import readable_names

# kind -> (Biolink category, label of the i-th entity)
KINDS = {
    "drug": ("biolink:Drug", lambda i: f"CHEBI:{100001 + i}"),
    "gene": ("biolink:Gene", lambda i: f"NCBIGene:{1001 + i}"),
    "pathway": ("biolink:Pathway", lambda i: f"REACT:R-HSA-{i + 1:04d}"),
    "disease": ("biolink:Disease", lambda i: f"MONDO:{i + 1:07d}"),
    "phenotype": ("biolink:PhenotypicFeature", lambda i: f"HP:{i + 1:07d}"),
}

# (predicate, head kind, tail kind, driver kind, config field with the mean count, minimum)
SCHEMAS = (
    (PARTICIPATES, "gene", "pathway", "gene", "pathways_per_gene", 1),
    (INTERACTS, "gene", "gene", "gene", "interactions_per_gene", 1),
    (GENE_CONDITION, "gene", "disease", "disease", "genes_per_disease", 1),
    (PATHWAY_DISEASE, "pathway", "disease", "pathway", "diseases_per_pathway", 1),
    (HAS_PHENOTYPE, "disease", "phenotype", "disease", "phenotypes_per_disease", 1),
    (GENE_PHENOTYPE, "gene", "phenotype", "phenotype", "genes_per_phenotype", 1),
    (AFFECTS, "drug", "gene", "drug", "targets_per_drug", 1),
    (INTERACTS, "drug", "gene", "drug", "binding_partners_per_drug", 0),
    (SIDE_EFFECT, "drug", "phenotype", "drug", "side_effects_per_drug", 0),
    (SUBCLASS, "disease", "disease", "disease", "parents_per_disease", 0),
)


@dataclass
class SyntheticConfig:
    """Sizes and knobs of the generator; the defaults make the demo graph (1,000 entities)."""

    n_drugs: int = 200
    n_genes: int = 400
    n_pathways: int = 75
    n_diseases: int = 150
    n_phenotypes: int = 175
    zipf_exponent: float = 0.9  # popularity skew; 0 = uniform (no hubs)
    n_modules: int = 25  # latent disease modules (biological processes)
    module_coherence: float = 0.95  # share of an entity's partners drawn from its own module
    # mean number of partners each entity of the driver type draws (see SCHEMAS)
    pathways_per_gene: float = 2.0
    interactions_per_gene: float = 2.5
    genes_per_disease: float = 4.0
    diseases_per_pathway: float = 2.5
    phenotypes_per_disease: float = 5.0
    genes_per_phenotype: float = 2.0
    targets_per_drug: float = 2.5
    binding_partners_per_drug: float = 1.0
    side_effects_per_drug: float = 2.0
    parents_per_disease: float = 0.5
    treats_per_drug: float = 8.0  # walks drawn per drug; repeats of one pair count once
    template_weights: dict[str, float] = field(
        default_factory=lambda: {
            "target_gene_condition": 0.3,
            "target_pathway_disease": 0.25,
            "binding_partner_condition": 0.15,
            "target_phenotype": 0.15,
            "interactor_pathway_disease": 0.15,
        }
    )
    druggable_fraction: float = 0.25  # share of genes drugs target or bind (the druggable genome)
    # share of a walk's steps past the drug that take the node's dominant continuation (the
    # partner with the highest hidden salience): drugs sharing a target then share its mechanism
    mechanism_reuse: float = 0.9
    noise_edge_fraction: float = 0.05
    noise_treats_fraction: float = 0.05
    n_test: int = 100
    n_valid_treats: int = 20
    n_valid_other: int = 150

    @classmethod
    def quick(cls, **overrides) -> "SyntheticConfig":
        """About 4x smaller, for CI and smoke tests."""
        small = dict(
            n_drugs=50,
            n_genes=100,
            n_pathways=20,
            n_diseases=40,
            n_phenotypes=45,
            n_modules=7,
            n_test=15,
            n_valid_treats=6,
            n_valid_other=40,
        )
        return cls(**{**small, **overrides})

    def size(self, kind: str) -> int:
        """The number of entities of one kind.

        Args:
            kind: An entity kind (``drug``, ``gene``...).

        Returns:
            The ``n_<kind>s`` setting.
        """
        return getattr(self, f"n_{kind}s")

    def validate(self) -> None:
        """Check the settings.

        Raises:
            TracegraphError: If a count, weight, fraction or exponent is out of range.
        """
        if any(self.size(k) < 2 for k in KINDS):
            raise TracegraphError("every entity type needs at least 2 entities")
        unknown = set(self.template_weights) - set(TEMPLATES)
        if unknown or not any(w > 0 for w in self.template_weights.values()):
            raise TracegraphError(f"template_weights need positive weights for some of {list(TEMPLATES)}")
        if min(self.noise_edge_fraction, self.noise_treats_fraction, self.zipf_exponent) < 0:
            raise TracegraphError("noise fractions and zipf_exponent must be >= 0")
        if self.n_modules < 1 or not 0 <= self.module_coherence <= 1:
            raise TracegraphError("n_modules must be >= 1 and module_coherence in [0, 1]")
        if not 0 <= self.mechanism_reuse <= 1 or not 0 < self.druggable_fraction <= 1:
            raise TracegraphError("mechanism_reuse must be in [0, 1] and druggable_fraction in (0, 1]")


@dataclass
class SyntheticKG:
    """A generated knowledge graph with its planted mechanisms.

    Attributes:
        config: The generator's settings.
        seed: The generator's seed.
        train: Training triples (labels).
        valid: Validation triples.
        test: Test triples.
        mechanisms: Every planted treats edge (all splits) to its mechanism paths.
        names: Label to readable name.
        categories: Label to Biolink category.
    """

    config: SyntheticConfig
    seed: int
    train: list[Triple]
    valid: list[Triple]
    test: list[Triple]
    mechanisms: dict[Triple, list[MechanismPath]]  # every planted treats edge, all splits
    names: dict[str, str]  # label -> readable name
    categories: dict[str, str]  # label -> Biolink category

    def counts(self) -> dict:
        """Counts of entities (by category), relations, triples per split and planted mechanism paths."""
        cats = list(self.categories.values())
        test_paths = [self.mechanisms[t] for t in self.test]
        return {
            "entities": len(self.names),
            "entities_by_category": {c: cats.count(c) for c in dict.fromkeys(cats)},
            "relations": len({r for _, r, _ in self.train}),
            "train": len(self.train),
            "valid": len(self.valid),
            "test": len(self.test),
            "train_treats": sum(r == TREATS for _, r, _ in self.train),
            "train_treats_with_mechanism": sum(r == TREATS and (h, r, t) in self.mechanisms for h, r, t in self.train),
            "valid_treats": sum(r == TREATS for _, r, _ in self.valid),
            "test_mechanism_paths": sum(map(len, test_paths)),
            "test_triples_with_several_paths": sum(len(p) > 1 for p in test_paths),
            "test_paths_by_template": _count(p.template for ps in test_paths for p in ps),
        }


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


# --------------------------------------------------------------------------- generation


def generate(config: SyntheticConfig | None = None, seed: int = 0) -> SyntheticKG:
    """Generate a synthetic drug-gene-disease graph; the same config and seed give the same graph.

    Args:
        config: The generator's settings; None for the defaults.
        seed: The random seed.

    Returns:
        The graph.

    Raises:
        TracegraphError: If the settings are invalid.
    """
    config = config or SyntheticConfig()
    config.validate()
    rng = np.random.default_rng(seed)
    labels = {k: [make(i) for i in range(config.size(k))] for k, (_, make) in KINDS.items()}
    names = readable_names(labels, rng)
    categories = {lab: KINDS[k][0] for k, labs in labels.items() for lab in labs}
    popularity = {k: _zipf_weights(len(labs), config.zipf_exponent, rng) for k, labs in labels.items()}
    # balanced module membership: entity i of a kind belongs to module (shuffled i) mod n_modules
    modules = {k: rng.permutation(len(labs)) % config.n_modules for k, labs in labels.items()}

    # drugs reach genes only in the druggable subset (at least 2), still by popularity
    druggable = rng.permutation(config.n_genes) < max(2, round(config.druggable_fraction * config.n_genes))
    background = _background_edges(config, labels, popularity, modules, druggable, rng)
    noise = _noise_edges(config, labels, round(config.noise_edge_fraction * len(background)), set(background), rng)
    salience = {lab: float(x) for lab, x in zip(categories, rng.random(len(categories)))}
    mechanisms = plant_treatments(config, labels, background, salience, rng)
    planted = list(mechanisms)
    n_held = config.n_test + config.n_valid_treats
    if n_held >= len(planted):
        raise TracegraphError(
            f"only {len(planted)} planted treats edges for {n_held} held-out ones: "
            "raise n_drugs or treats_per_drug, or lower n_test / n_valid_treats"
        )
    order = rng.permutation(len(planted))
    test = [planted[i] for i in order[: config.n_test]]
    valid_treats = [planted[i] for i in order[config.n_test : n_held]]
    train_treats = [planted[i] for i in order[n_held:]]
    noise_treats = _noise_treats(config, labels, popularity, set(planted), len(planted), rng)

    kept = background + noise
    on_mechanism = {e for paths in mechanisms.values() for p in paths for e in p.edges}
    valid_other = _hold_out_edges(kept + train_treats + noise_treats, on_mechanism, config.n_valid_other, rng)
    held = set(valid_other)
    train = [e for e in kept if e not in held] + train_treats + noise_treats
    train = [train[i] for i in rng.permutation(len(train))]  # no grouping by relation in the file
    valid = valid_treats + valid_other
    valid = [valid[i] for i in rng.permutation(len(valid))]
    return SyntheticKG(config, seed, train, valid, test, mechanisms, names, categories)


def _zipf_weights(n: int, exponent: float, rng) -> np.ndarray:
    w = rng.permutation(np.arange(1, n + 1, dtype=float)) ** -exponent
    return w / w.sum()


def _background_edges(config, labels, popularity, modules, druggable, rng) -> list[Triple]:
    edges: dict[Triple, None] = {}  # ordered set: insertion order keeps the output deterministic
    partner_dist: dict[tuple[str, int, bool], np.ndarray] = {}
    for pred, head_kind, tail_kind, driver, rate_field, minimum in SCHEMAS:
        partner_kind = tail_kind if driver == head_kind else head_kind
        same_kind = head_kind == tail_kind
        drug_target = driver == "drug" and partner_kind == "gene"
        for i, node in enumerate(labels[driver]):
            k = minimum + rng.poisson(max(getattr(config, rate_field) - minimum, 0.0))
            module = int(modules[driver][i])
            key = (partner_kind, module, drug_target)
            if key not in partner_dist:
                pop = popularity[partner_kind]
                if drug_target:
                    pop = np.where(druggable, pop, 0.0)
                    pop = pop / pop.sum()
                partner_dist[key] = _partner_distribution(config, pop, modules[partner_kind], module)
            p = partner_dist[key]
            if same_kind:  # no self-loops
                p = p.copy()
                p[i] = 0.0
                p /= p.sum()
            k = min(k, int(np.count_nonzero(p)))
            for j in rng.choice(len(p), size=k, replace=False, p=p):
                partner = labels[partner_kind][j]
                h, t = (node, partner) if driver == head_kind else (partner, node)
                if pred == INTERACTS and same_kind and (t, pred, h) in edges:
                    continue  # symmetric relation: store each interaction once
                edges[(h, pred, t)] = None
    return list(edges)


def _partner_distribution(config, popularity, partner_modules, module) -> np.ndarray:
    """Popularity, with ``module_coherence`` of the mass on the driver's own module."""
    inside = np.where(partner_modules == module, popularity, 0.0)
    if inside.sum() == 0:
        return popularity
    c = config.module_coherence
    return c * inside / inside.sum() + (1 - c) * popularity


def _noise_edges(config, labels, count, existing, rng) -> list[Triple]:
    """Spurious edges: a random schema, uniformly random endpoints (no popularity)."""
    out: dict[Triple, None] = {}
    for _ in range(count):
        pred, hk, tk, *_ = SCHEMAS[rng.integers(len(SCHEMAS))]
        h = labels[hk][rng.integers(len(labels[hk]))]
        t = labels[tk][rng.integers(len(labels[tk]))]
        if h != t and (h, pred, t) not in existing:
            out[(h, pred, t)] = None
    return list(out)


def _noise_treats(config, labels, popularity, planted, n_planted, rng) -> list[Triple]:
    """Treats edges with no mechanism (off-label use, curation errors); train only."""
    out: dict[Triple, None] = {}
    for _ in range(round(config.noise_treats_fraction * n_planted)):
        drug = labels["drug"][rng.integers(len(labels["drug"]))]
        disease = labels["disease"][rng.choice(len(labels["disease"]), p=popularity["disease"])]
        if (drug, TREATS, disease) not in planted:
            out[(drug, TREATS, disease)] = None
    return list(out)


def _hold_out_edges(edges, protected, count, rng) -> list[Triple]:
    """Non-treats edges for validation, off every mechanism, leaving both ends in train."""
    degree: dict[str, int] = {}
    for h, _, t in edges:
        degree[h] = degree.get(h, 0) + 1
        degree[t] = degree.get(t, 0) + 1
    out = []
    for i in rng.permutation(len(edges)):
        if len(out) == count:
            break
        h, r, t = e = edges[i]
        if r == TREATS or e in protected or degree[h] < 2 or degree[t] < 2:
            continue
        degree[h] -= 1
        degree[t] -= 1
        out.append(e)
    return out


# --------------------------------------------------------------------------- writing

MECHANISM_HEADER = (
    "test_head",
    "test_relation",
    "test_tail",
    "path_id",
    "template",
    "edge_head",
    "edge_relation",
    "edge_tail",
)


def write(kg: SyntheticKG, out_dir: str | Path) -> dict:
    """Write the splits, id maps, names, categories, test mechanisms and config into ``out_dir``.

    ``mechanisms.tsv`` has one row per ground-truth edge; ``path_id`` numbers planted paths across
    the file, so a test triple planted by several walks has several path ids, all listed.

    Args:
        kg: The graph.
        out_dir: The directory to write into.

    Returns:
        The graph's counts (see :meth:`SyntheticKG.counts`).
    """
    from tracegraph.kg.data.split import write_triples
    from tracegraph.kg.data.idmap import IdMap, write_name_dict
    from tracegraph.runtime.checkpoints import atomic_write_json, atomic_write_text

    out = Path(out_dir)
    entities = IdMap.from_labels(kg.names)
    relations = IdMap.from_labels(r for _, r, _ in kg.train)
    for name in ("train", "valid", "test"):
        write_triples(out / f"{name}.txt", getattr(kg, name))
    entities.write(out / "node_dict.txt")
    relations.write(out / "rel_dict.txt")
    write_name_dict(out / "node_name_dict.txt", {i: kg.names[lab] for i, lab in enumerate(entities.labels)})
    atomic_write_text(
        out / "node_category.txt", "".join(f"{kg.categories[lab]}\t{i}\n" for i, lab in enumerate(entities.labels))
    )
    rows, path_id = ["\t".join(MECHANISM_HEADER)], 0
    for triple in kg.test:
        for path in kg.mechanisms[triple]:
            rows += ["\t".join((*triple, str(path_id), path.template, *edge)) for edge in path.edges]
            path_id += 1
    atomic_write_text(out / "mechanisms.tsv", "\n".join(rows) + "\n")
    counts = kg.counts()
    atomic_write_json(
        out / "synthetic_config.json",
        {
            "seed": kg.seed,
            "config": asdict(kg.config),
            "counts": counts,
            "templates": {n: [f"{p} ({d}) -> {k}" for p, d, k in steps] for n, steps in TEMPLATES.items()},
        },
    )
    return counts


__all__ = ["SyntheticConfig", "SyntheticKG", "MechanismPath", "TEMPLATES", "generate", "write"]
