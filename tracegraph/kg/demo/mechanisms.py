"""The drug mechanisms the demo graph plants (stage 3 of ``tracegraph.kg.demo.synthetic``).

A drug treats a disease because a walk from it along background edges, following one of the
mechanism templates, ends at that disease. Here are the Biolink predicates the generated graph
uses, the templates, and the walks that plant the treatments; ``synthetic`` draws the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Triple = tuple[str, str, str]

TREATS = "biolink:treats"
AFFECTS = "biolink:affects"
INTERACTS = "biolink:interacts_with"
GENE_CONDITION = "biolink:gene_associated_with_condition"
PARTICIPATES = "biolink:participates_in"
PATHWAY_DISEASE = "biolink:associated_with"
GENE_PHENOTYPE = "biolink:contributes_to"
HAS_PHENOTYPE = "biolink:has_phenotype"
SIDE_EFFECT = "biolink:has_side_effect"
SUBCLASS = "biolink:subclass_of"


# Mechanism templates: steps of (predicate, direction, kind of the next node). "out" follows
# head->tail, "in" tail->head, "both" either (interacts_with is symmetric but stored once).
TEMPLATES = {
    "target_gene_condition": ((AFFECTS, "out", "gene"), (GENE_CONDITION, "out", "disease")),
    "target_pathway_disease": (
        (AFFECTS, "out", "gene"),
        (PARTICIPATES, "out", "pathway"),
        (PATHWAY_DISEASE, "out", "disease"),
    ),
    "binding_partner_condition": (
        (INTERACTS, "out", "gene"),
        (INTERACTS, "both", "gene"),
        (GENE_CONDITION, "out", "disease"),
    ),
    "target_phenotype": (
        (AFFECTS, "out", "gene"),
        (GENE_PHENOTYPE, "out", "phenotype"),
        (HAS_PHENOTYPE, "in", "disease"),
    ),
    "interactor_pathway_disease": (
        (AFFECTS, "out", "gene"),
        (INTERACTS, "both", "gene"),
        (PARTICIPATES, "out", "pathway"),
        (PATHWAY_DISEASE, "out", "disease"),
    ),
}


@dataclass(frozen=True)
class MechanismPath:
    """One planted mechanism: the walk from a drug to the disease it treats.

    Attributes:
        template: The template it follows.
        edges: Its edges as stored in train, in walk order from drug to disease.
    """

    template: str
    edges: tuple[Triple, ...]  # as stored in train, in walk order from drug to disease


class _Neighbours:
    """(node, predicate, direction) -> neighbours, in edge order (deterministic)."""

    def __init__(self, edges: list[Triple]):
        self.index: dict[tuple[str, str, str], list[tuple[str, Triple]]] = {}
        for e in edges:
            h, r, t = e
            self.index.setdefault((h, r, "out"), []).append((t, e))
            self.index.setdefault((t, r, "in"), []).append((h, e))

    def of(self, node: str, pred: str, direction: str) -> list[tuple[str, Triple]]:
        if direction == "both":
            return self.index.get((node, pred, "out"), []) + self.index.get((node, pred, "in"), [])
        return self.index.get((node, pred, direction), [])


def plant_treatments(config, labels, background, salience, rng) -> dict[Triple, list[MechanismPath]]:
    """Each drug's walks (about ``treats_per_drug``), keyed by the treats edge each one plants."""
    nb = _Neighbours(background)
    names = [n for n in TEMPLATES if config.template_weights.get(n, 0) > 0]
    w = np.array([config.template_weights[n] for n in names], dtype=float)
    w /= w.sum()
    mechanisms: dict[Triple, list[MechanismPath]] = {}
    for drug in labels["drug"]:
        wanted = 1 + rng.poisson(max(config.treats_per_drug - 1, 0.0))
        for _ in range(wanted):
            for _attempt in range(20):  # a walk can dead-end (e.g. a gene with no disease)
                template = names[rng.choice(len(names), p=w)]
                path = _walk(drug, TEMPLATES[template], nb, salience, config.mechanism_reuse, rng)
                if path is not None:
                    break
            else:
                continue
            disease = _end_of(drug, path)
            paths = mechanisms.setdefault((drug, TREATS, disease), [])
            found = MechanismPath(template, path)
            if found not in paths:
                paths.append(found)
    return mechanisms


def _walk(start: str, steps, nb: _Neighbours, salience, reuse: float, rng) -> tuple[Triple, ...] | None:
    """One random simple walk following the template's steps, or None at a dead end.

    Past the first step it takes, with probability ``reuse``, the most salient matching neighbour
    (the node's dominant continuation, the same for every walk through it), else a uniform one.
    """
    node, visited, edges = start, {start}, []
    for i, (pred, direction, kind) in enumerate(steps):
        options = [(n, e) for n, e in nb.of(node, pred, direction) if n not in visited and _kind(n) == kind]
        if not options:
            return None
        if i > 0 and rng.random() < reuse:
            node, edge = max(options, key=lambda o: salience[o[0]])
        else:
            node, edge = options[rng.integers(len(options))]
        visited.add(node)
        edges.append(edge)
    return tuple(edges)


def _end_of(start: str, path: tuple[Triple, ...]) -> str:
    node = start
    for h, _, t in path:
        node = t if h == node else h
    return node


_PREFIX_KIND = {"CHEBI": "drug", "NCBIGene": "gene", "REACT": "pathway", "MONDO": "disease", "HP": "phenotype"}


def _kind(label: str) -> str:
    return _PREFIX_KIND[label.split(":", 1)[0]]
