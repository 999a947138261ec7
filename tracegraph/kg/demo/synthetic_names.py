"""Readable names for the generated knowledge graph (``tracegraph.kg.demo.synthetic``).

Drug names are pronounceable with real INN stems ("Velotinib"), genes get symbol-like names
("KRT17"), pathways, diseases and phenotypes descriptive ones ("hepatic fibrosis type 2").
Names are unique within a kind, so a reader can tell entities apart in explanations.
"""

from __future__ import annotations

import itertools

_DRUG_STEMS = (
    "tinib",
    "mab",
    "pril",
    "olol",
    "statin",
    "vir",
    "azole",
    "profen",
    "sartan",
    "cillin",
    "parin",
    "dronate",
    "setron",
    "glitazone",
    "lukast",
)
_ONSETS = ("b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "cl", "tr", "pr", "x")
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ia")
_PATHWAY_TOPICS = (
    "lipid transport",
    "glucose metabolism",
    "MAPK signalling",
    "DNA repair",
    "apoptosis",
    "Wnt signalling",
    "immune response",
    "cell cycle",
    "mTOR signalling",
    "ion transport",
    "inflammation",
    "oxidative stress response",
    "angiogenesis",
    "insulin signalling",
    "autophagy",
    "TGF-beta signalling",
    "cholesterol biosynthesis",
    "synaptic transmission",
    "collagen formation",
    "interferon signalling",
)
_ORGANS = (
    "hepatic",
    "renal",
    "cardiac",
    "pulmonary",
    "neural",
    "dermal",
    "gastric",
    "ocular",
    "skeletal",
    "vascular",
    "pancreatic",
    "thyroid",
)
_DISEASE_CLASSES = (
    "carcinoma",
    "fibrosis",
    "myopathy",
    "inflammation",
    "dystrophy",
    "insufficiency",
    "sclerosis",
    "neuropathy",
)
_CHANGES = ("Elevated", "Reduced", "Abnormal", "Fluctuating")
_MEASURES = (
    "serum creatinine",
    "blood glucose",
    "heart rate",
    "bone density",
    "muscle tone",
    "liver enzymes",
    "visual acuity",
    "skin pigmentation",
    "lung capacity",
    "nerve conduction",
    "body weight",
    "platelet count",
    "blood pressure",
    "serum sodium",
)


def readable_names(labels: dict[str, list[str]], rng) -> dict[str, str]:
    """Pronounceable drug names, gene symbols and descriptive names; unique within a kind.

    Args:
        labels: Entity kind to its labels.
        rng: A NumPy random generator.

    Returns:
        Label to readable name.
    """

    def pick(seq):
        return seq[rng.integers(len(seq))]

    def unique(n, make):
        seen: dict[str, None] = {}
        while len(seen) < n:
            name = make()
            seen[name if name not in seen else f"{name}-{len(seen)}"] = None  # a rare clash: number it
        return list(seen)

    def numbered(n, phrases, always=False):
        """Shuffled phrases; once they run out, 'type 2', 'type 3', ... (or numbers throughout)."""
        phrases = [phrases[i] for i in rng.permutation(len(phrases))]
        return [
            phrases[i % len(phrases)]
            + (f" {i // len(phrases) + 1}" if always else f" type {i // len(phrases) + 1}" if i >= len(phrases) else "")
            for i in range(n)
        ]

    diseases = [f"{o} {c}" for o, c in itertools.product(_ORGANS, _DISEASE_CLASSES)]
    phenotypes = [f"{c} {m}" for c, m in itertools.product(_CHANGES, _MEASURES)]
    made = {
        "drug": unique(
            len(labels["drug"]),
            lambda: (pick(_ONSETS) + pick(_VOWELS) + pick(_ONSETS) + pick(_VOWELS)).capitalize() + pick(_DRUG_STEMS),
        ),
        "gene": unique(
            len(labels["gene"]),
            lambda: "".join(chr(65 + c) for c in rng.integers(26, size=rng.integers(2, 5))) + str(rng.integers(1, 30)),
        ),
        "pathway": [f"Pathway: {n}" for n in numbered(len(labels["pathway"]), list(_PATHWAY_TOPICS), always=True)],
        "disease": numbered(len(labels["disease"]), diseases),
        "phenotype": numbered(len(labels["phenotype"]), phenotypes),
    }
    return {lab: name for k in labels for lab, name in zip(labels[k], made[k])}
