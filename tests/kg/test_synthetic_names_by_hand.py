"""Readable names for the synthetic graph, by hand: drug names built from an onset-vowel-onset-vowel
syllable pair and an INN stem, gene symbols of 2 to 4 capitals and a number 1 to 29, pathways as
"Pathway: topic N", diseases and phenotypes descriptive and numbered "type 2", "type 3"… only once
the phrases run out; names unique within a kind, a clash numbered by the count so far.

References: regular expressions and phrase lists written out here from the module docstring's
promises, counts by hand, and a stub generator whose draws are known so the exact names can be
written down.
"""

import re

import numpy as np

from tracegraph.kg.demo.synthetic_names import readable_names

STEMS = "tinib mab pril olol statin vir azole profen sartan cillin parin dronate setron glitazone lukast".split()
ONSET = "(?:br|cl|tr|pr|b|c|d|f|g|l|m|n|p|r|s|t|v|z|x)"
VOWEL = "(?:ae|ia|a|e|i|o|u)"
DRUG = re.compile(rf"^{ONSET}{VOWEL}{ONSET}{VOWEL}(?P<stem>{'|'.join(STEMS)})$")
GENE = re.compile(r"^(?P<letters>[A-Z]{2,4})(?P<number>[1-9]|[12][0-9])$")
TOPICS = [
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
]
ORGANS = "hepatic renal cardiac pulmonary neural dermal gastric ocular skeletal vascular pancreatic thyroid".split()
CLASSES = "carcinoma fibrosis myopathy inflammation dystrophy insufficiency sclerosis neuropathy".split()
DISEASES = [f"{o} {c}" for o in ORGANS for c in CLASSES]  # 96
MEASURES = [
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
]
PHENOTYPES = [f"{c} {m}" for c in ("Elevated", "Reduced", "Abnormal", "Fluctuating") for m in MEASURES]  # 56
KINDS = ("drug", "gene", "pathway", "disease", "phenotype")


def _labels(**counts):
    return {k: [f"{k}:{i}" for i in range(counts.get(k, 0))] for k in KINDS}


def _names(seed=0, **counts):
    labels = _labels(**counts)
    got = readable_names(labels, np.random.default_rng(seed))
    return {k: [got[lab] for lab in labels[k]] for k in KINDS}, got


class LowestDraws:
    """A generator that always draws the lowest value and never shuffles."""

    def integers(self, low, high=None, size=None):
        lo = 0 if high is None else low
        return np.full(size, lo) if size is not None else lo

    def permutation(self, n):
        return np.arange(n)


def test_every_label_gets_a_name_and_only_labels_are_keys():
    names, got = _names(drug=3, gene=4, pathway=2, disease=5, phenotype=1)
    assert set(got) == {
        lab for labs in _labels(drug=3, gene=4, pathway=2, disease=5, phenotype=1).values() for lab in labs
    }
    assert [len(names[k]) for k in KINDS] == [3, 4, 2, 5, 1]


def test_drug_names_are_capitalised_syllables_and_an_inn_stem_using_every_part():
    names, _ = _names(seed=1, drug=400)
    drugs = names["drug"]
    assert len(set(drugs)) == 400
    stems = set()
    for d in drugs:
        base = d.split("-")[0]  # a rare clash is numbered
        assert base[0].isupper() and base[1:] == base[1:].lower(), d
        m = DRUG.match(base.lower())
        assert m, d
        stems.add(m["stem"])
    assert stems == set(STEMS)  # every stem drawn, the last one too
    firsts = {d[:2].lower() for d in drugs}
    assert {"br", "cl", "tr", "pr"} & firsts and any(d[0] == "X" for d in drugs)  # the last onset drawn too
    assert any(d.lower()[1:3] == "ia" for d in drugs)  # and the last vowel


def test_gene_symbols_are_two_to_four_capitals_and_a_number_from_1_to_29():
    names, _ = _names(seed=2, gene=600)
    genes = names["gene"]
    assert len(set(genes)) == 600
    lengths, numbers, letters = set(), set(), set()
    for g in genes:
        m = GENE.match(g.split("-")[0])
        assert m, g
        lengths.add(len(m["letters"]))
        numbers.add(int(m["number"]))
        letters |= set(m["letters"])
    assert lengths == {2, 3, 4}
    assert numbers == set(range(1, 30))
    assert letters == set("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def test_a_clash_is_numbered_by_the_names_made_so_far():
    labels = _labels(drug=3, gene=3, pathway=1, disease=1, phenotype=1)
    got = readable_names(labels, LowestDraws())
    assert [got[lab] for lab in labels["drug"]] == ["Babatinib", "Babatinib-1", "Babatinib-2"]
    assert [got[lab] for lab in labels["gene"]] == ["AA1", "AA1-1", "AA1-2"]
    # never shuffled: the first phrase of each list
    assert got["pathway:0"] == "Pathway: lipid transport 1"
    assert got["disease:0"] == "hepatic carcinoma"
    assert got["phenotype:0"] == "Elevated serum creatinine"


def test_pathways_are_numbered_throughout_and_cycle_the_shuffled_topics():
    names, _ = _names(seed=3, pathway=45)
    p = names["pathway"]
    assert all(n.startswith("Pathway: ") for n in p)
    first = [n[len("Pathway: ") :] for n in p[:20]]
    assert all(n.endswith(" 1") for n in first)
    topics = [n[: -len(" 1")] for n in first]
    assert sorted(topics) == sorted(TOPICS)
    assert p[20:40] == [f"Pathway: {t} 2" for t in topics]
    assert p[40:] == [f"Pathway: {t} 3" for t in topics[:5]]


def test_diseases_are_organ_and_class_unnumbered_until_the_96_run_out_then_type_2():
    names, _ = _names(seed=4, disease=100)
    d = names["disease"]
    assert sorted(d[:96]) == sorted(DISEASES)
    assert d[96:] == [f"{x} type 2" for x in d[:4]]
    names, _ = _names(seed=4, disease=96)
    assert sorted(names["disease"]) == sorted(DISEASES)  # exactly the phrases, none numbered


def test_phenotypes_are_change_and_measure_then_type_2_and_3():
    names, _ = _names(seed=5, phenotype=120)
    ph = names["phenotype"]
    assert sorted(ph[:56]) == sorted(PHENOTYPES)
    assert ph[56:112] == [f"{x} type 2" for x in ph[:56]]
    assert ph[112:] == [f"{x} type 3" for x in ph[:8]]


def test_phrases_are_shuffled_by_the_generator_and_reproducible():
    orders = [tuple(_names(seed=s, disease=96, phenotype=56, pathway=20)[1].values()) for s in range(3)]
    assert orders[0] == tuple(_names(seed=0, disease=96, phenotype=56, pathway=20)[1].values())
    assert len(set(orders)) == 3
    names, _ = _names(seed=0, disease=96, phenotype=56, pathway=20)
    assert names["disease"] != DISEASES and names["phenotype"] != PHENOTYPES
    assert names["pathway"] != [f"Pathway: {t} 1" for t in TOPICS]


def test_names_are_unique_within_a_kind():
    names, _ = _names(seed=6, drug=50, gene=50, pathway=30, disease=130, phenotype=70)
    for k in KINDS:
        assert len(set(names[k])) == len(names[k]), k


def test_a_seed_gives_the_names_of_the_documented_recipe_drawn_in_order():
    """Drugs, then genes, then the shuffles of pathways, diseases and phenotypes, one draw each,
    replayed here as a plain loop: the demo's seeded graphs keep their names."""
    onsets = "b c d f g l m n p r s t v z br cl tr pr x".split()
    vowels = "a e i o u ae ia".split()
    rng = np.random.default_rng(7)
    drugs = []
    for _ in range(3):
        o1, v1, o2, v2 = (seq[rng.integers(len(seq))] for seq in (onsets, vowels, onsets, vowels))
        drugs.append((o1 + v1 + o2 + v2).capitalize() + STEMS[rng.integers(len(STEMS))])
    genes = []
    for _ in range(2):
        size = rng.integers(2, 5)
        letters = "".join(chr(ord("A") + int(c)) for c in rng.integers(26, size=size))
        genes.append(letters + str(rng.integers(1, 30)))
    topics = [TOPICS[i] for i in rng.permutation(20)]
    diseases = [DISEASES[i] for i in rng.permutation(96)]
    phenotypes = [PHENOTYPES[i] for i in rng.permutation(56)]
    names, _ = _names(seed=7, drug=3, gene=2, pathway=2, disease=2, phenotype=2)
    assert names == {
        "drug": drugs,
        "gene": genes,
        "pathway": [f"Pathway: {t} 1" for t in topics[:2]],
        "disease": diseases[:2],
        "phenotype": phenotypes[:2],
    }
