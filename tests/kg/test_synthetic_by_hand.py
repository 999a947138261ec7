"""The synthetic graph generator by hand: the documented sizes and knobs, every refusal word for word
at its edges, the popularity and module mixture on a four-entity example, mechanism walks on a
hand-built graph under a stub generator (first step uniform, later steps the most salient partner
with probability ``mechanism_reuse``), held-out edges that keep both ends in train, counts and the
written files of a hand-built graph, and a tiny generated graph whose rates sit at their minimums
so every driver's partner count is known exactly.

References: the module docstring's generative story and the defaults it states, numbers worked out
by hand in the comments, and files written out by hand.
"""

import json
from types import SimpleNamespace

import numpy as np
import pytest

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
    _end_of,
    _kind,
    _Neighbours,
    _walk,
    plant_treatments,
)
from tracegraph.kg.demo.synthetic import (
    SyntheticConfig,
    SyntheticKG,
    _hold_out_edges,
    _noise_edges,
    _partner_distribution,
    _zipf_weights,
    generate,
    write,
)

D1, D2 = "CHEBI:100001", "CHEBI:100002"
G1, G2, G3 = "NCBIGene:1001", "NCBIGene:1002", "NCBIGene:1003"
M1, M2 = "MONDO:0000001", "MONDO:0000002"
P1 = "HP:0000001"


class Draws:
    """A stub generator: ``integers`` and ``random`` return the values given, in order."""

    def __init__(self, integers=(), randoms=()):
        self._i, self._r = list(integers), list(randoms)

    def integers(self, n):
        v = self._i.pop(0)
        assert 0 <= v < n
        return v

    def random(self):
        return self._r.pop(0)

    def permutation(self, n):
        return np.arange(n)


# ---- the config


def test_the_defaults_make_the_documented_1000_entity_demo_graph():
    c = SyntheticConfig()
    assert (c.n_drugs, c.n_genes, c.n_pathways, c.n_diseases, c.n_phenotypes) == (200, 400, 75, 150, 175)
    assert sum(c.size(k) for k in ("drug", "gene", "pathway", "disease", "phenotype")) == 1000
    assert (c.n_test, c.n_valid_treats, c.n_valid_other) == (100, 20, 150)
    assert (c.zipf_exponent, c.n_modules, c.module_coherence) == (0.9, 25, 0.95)
    assert (c.druggable_fraction, c.mechanism_reuse, c.treats_per_drug) == (0.25, 0.9, 8.0)
    assert sum(c.template_weights.values()) == pytest.approx(1.0) and set(c.template_weights) == set(TEMPLATES)


def test_quick_is_about_four_times_smaller_and_takes_overrides():
    q = SyntheticConfig.quick()
    assert (q.n_drugs, q.n_genes, q.n_pathways, q.n_diseases, q.n_phenotypes) == (50, 100, 20, 40, 45)
    assert (q.n_modules, q.n_test, q.n_valid_treats, q.n_valid_other) == (7, 15, 6, 40)
    assert q.treats_per_drug == 8.0  # the rest are the defaults
    o = SyntheticConfig.quick(n_genes=9, mechanism_reuse=0.1)
    assert (o.n_genes, o.mechanism_reuse, o.n_drugs) == (9, 0.1, 50)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (dict(n_pathways=1), "every entity type needs at least 2 entities"),
        (dict(n_phenotypes=1), "every entity type needs at least 2 entities"),
        (dict(template_weights={"nope": 1.0, "target_phenotype": 1.0}), "template_weights need positive weights"),
        (dict(template_weights={"target_phenotype": 0.0}), "template_weights need positive weights"),
        (dict(noise_edge_fraction=-0.01), "noise fractions and zipf_exponent must be >= 0"),
        (dict(noise_treats_fraction=-0.01), "noise fractions and zipf_exponent must be >= 0"),
        (dict(zipf_exponent=-0.01), "noise fractions and zipf_exponent must be >= 0"),
        (dict(n_modules=0), "n_modules must be >= 1 and module_coherence in [0, 1]"),
        (dict(module_coherence=1.01), "n_modules must be >= 1 and module_coherence in [0, 1]"),
        (dict(module_coherence=-0.01), "n_modules must be >= 1 and module_coherence in [0, 1]"),
        (dict(mechanism_reuse=-0.01), "mechanism_reuse must be in [0, 1] and druggable_fraction in (0, 1]"),
        (dict(mechanism_reuse=1.01), "mechanism_reuse must be in [0, 1] and druggable_fraction in (0, 1]"),
        (dict(druggable_fraction=0.0), "mechanism_reuse must be in [0, 1] and druggable_fraction in (0, 1]"),
        (dict(druggable_fraction=1.01), "mechanism_reuse must be in [0, 1] and druggable_fraction in (0, 1]"),
    ],
)
def test_each_setting_out_of_range_is_refused_word_for_word(bad, message):
    if message.startswith("template_weights"):
        message += f" for some of {list(TEMPLATES)}"
    with pytest.raises(TracegraphError) as e:
        SyntheticConfig.quick(**bad).validate()
    assert str(e.value) == message


def test_settings_at_the_edges_of_their_ranges_are_accepted():
    SyntheticConfig.quick(
        n_drugs=2,
        n_genes=2,
        n_pathways=2,
        n_diseases=2,
        n_phenotypes=2,
        n_modules=1,
        module_coherence=1.0,
        mechanism_reuse=1.0,
        druggable_fraction=1.0,
        noise_edge_fraction=0.0,
        noise_treats_fraction=0.0,
        zipf_exponent=0.0,
        template_weights={"target_phenotype": 0.5, "target_gene_condition": 0.0},
    ).validate()
    SyntheticConfig.quick(module_coherence=0.0, mechanism_reuse=0.0).validate()


def test_generate_checks_the_settings():
    with pytest.raises(TracegraphError, match="^every entity type needs at least 2 entities$"):
        generate(SyntheticConfig.quick(n_drugs=1), 0)


# ---- popularity and modules


def test_popularity_is_zipf_over_shuffled_ranks():
    w = _zipf_weights(6, 0.9, np.random.default_rng(0))
    ranks = np.arange(1, 7, dtype=float) ** -0.9
    assert np.allclose(np.sort(w)[::-1], ranks / ranks.sum(), rtol=1e-12)
    assert w.sum() == pytest.approx(1.0)
    orders = {tuple(np.argsort(_zipf_weights(6, 0.9, np.random.default_rng(s)))) for s in range(5)}
    assert len(orders) > 1  # ranks shuffled
    assert np.allclose(_zipf_weights(4, 0.0, np.random.default_rng(0)), 0.25)  # 0: uniform


def test_partners_mix_the_own_module_and_popularity_by_coherence():
    pop = np.array([0.1, 0.2, 0.3, 0.4])
    mods = np.array([0, 1, 0, 1])
    # own module 0 holds 0.1 and 0.3: [0.25, 0, 0.75, 0]; 0.8 of that plus 0.2 of popularity
    got = _partner_distribution(SimpleNamespace(module_coherence=0.8), pop, mods, 0)
    assert np.allclose(got, [0.22, 0.04, 0.66, 0.08], rtol=0, atol=1e-15)
    # a module with no partners falls back to popularity
    assert _partner_distribution(SimpleNamespace(module_coherence=0.8), pop, mods, 2) is pop


# ---- mechanism walks


def _graph():
    return _Neighbours(
        [
            (D1, AFFECTS, G1),
            (D1, AFFECTS, G2),
            (G1, GENE_CONDITION, M1),
            (G1, GENE_CONDITION, M2),
            (D1, INTERACTS, G3),
            (G1, INTERACTS, G3),  # interacts_with stored once, walked either way
            (G2, GENE_PHENOTYPE, P1),
            (M2, HAS_PHENOTYPE, P1),
        ]
    )


SALIENCE = {D1: 0.0, G1: 0.9, G2: 0.1, G3: 0.5, M1: 0.2, M2: 0.7, P1: 0.3}


def test_neighbours_by_predicate_and_direction_in_edge_order():
    nb = _graph()
    assert [n for n, _ in nb.of(D1, AFFECTS, "out")] == [G1, G2]
    assert nb.of(G1, AFFECTS, "in") == [(D1, (D1, AFFECTS, G1))]
    assert [n for n, _ in nb.of(G3, INTERACTS, "both")] == [D1, G1]
    assert [n for n, _ in nb.of(G1, INTERACTS, "both")] == [G3]
    assert nb.of(M1, AFFECTS, "out") == []


def test_a_walk_takes_its_first_step_uniformly_and_later_the_most_salient_with_reuse():
    steps = TEMPLATES["target_gene_condition"]
    # first step: index 0 among [G1, G2] even with reuse 1 (G1 is also the most salient)
    assert _walk(D1, steps, _graph(), SALIENCE, 1.0, Draws([0], [0.5])) == ((D1, AFFECTS, G1), (G1, GENE_CONDITION, M2))
    # index 1 -> G2, whatever its salience; G2 has no disease: a dead end
    assert _walk(D1, steps, _graph(), SALIENCE, 1.0, Draws([1], [0.5])) is None
    # a draw at or above reuse takes a uniform continuation: index 0 -> M1
    assert _walk(D1, steps, _graph(), SALIENCE, 0.5, Draws([0, 0], [0.5])) == (
        (D1, AFFECTS, G1),
        (G1, GENE_CONDITION, M1),
    )
    assert _walk(D1, steps, _graph(), SALIENCE, 0.0, Draws([0, 1], [0.0])) == (
        (D1, AFFECTS, G1),
        (G1, GENE_CONDITION, M2),
    )


def test_a_walk_never_revisits_and_keeps_to_the_kind_and_stored_direction():
    # binding partner: D1 -interacts-> G3 -interacts(either way)-> G1 (not back to D1) -> disease
    steps = TEMPLATES["binding_partner_condition"]
    got = _walk(D1, steps, _graph(), SALIENCE, 1.0, Draws([0], [0.0, 0.0]))
    assert got == ((D1, INTERACTS, G3), (G1, INTERACTS, G3), (G1, GENE_CONDITION, M2))
    # a phenotype walk goes back along has_phenotype (stored disease -> phenotype)
    steps = TEMPLATES["target_phenotype"]
    got = _walk(D1, steps, _graph(), SALIENCE, 1.0, Draws([1], [0.0, 0.0]))
    assert got == ((D1, AFFECTS, G2), (G2, GENE_PHENOTYPE, P1), (M2, HAS_PHENOTYPE, P1))
    assert _end_of(D1, got) == M2
    assert _end_of(D1, ((D1, INTERACTS, G3), (G1, INTERACTS, G3))) == G1


def test_kind_is_read_from_the_label_prefix():
    assert [_kind(x) for x in (D1, G1, "REACT:R-HSA-0001", M1, P1)] == [
        "drug",
        "gene",
        "pathway",
        "disease",
        "phenotype",
    ]


# ---- held-out and noise edges


def test_held_out_edges_skip_treats_mechanism_edges_and_last_edges_of_a_node():
    e1, e2, e3, e4, e5 = ("A", "r", "B"), ("B", "r", "C"), ("A", "r", "C"), ("A", TREATS, "C"), ("C", "r", "D")
    # degrees A 3, B 2, C 4, D 1; e2 protected, e4 treats, e5 would leave D alone;
    # taking e1 leaves A 2, B 1; then e3 leaves A 1, C 3
    assert _hold_out_edges([e1, e2, e3, e4, e5], {e2}, 5, Draws()) == [e1, e3]
    assert _hold_out_edges([e1, e2, e3, e4, e5], {e2}, 1, Draws()) == [e1]
    assert _hold_out_edges([e1, e2, e3, e4, e5], {e2}, 0, Draws()) == []
    # B at degree 2 after e1 is taken... e2 alone: B 1 left, so never taken
    assert _hold_out_edges([e1, e2], set(), 2, Draws()) == []


def test_noise_edges_follow_a_schema_without_self_loops_or_existing_edges():
    labels = {
        "drug": [D1, D2],
        "gene": [G1, G2],
        "pathway": ["REACT:R-HSA-0001", "REACT:R-HSA-0002"],
        "disease": [M1, M2],
        "phenotype": [P1, "HP:0000002"],
    }
    existing = {(G1, INTERACTS, G2), (D1, AFFECTS, G1)}
    kinds = {
        PARTICIPATES: {("gene", "pathway")},
        INTERACTS: {("gene", "gene"), ("drug", "gene")},
        GENE_CONDITION: {("gene", "disease")},
        PATHWAY_DISEASE: {("pathway", "disease")},
        HAS_PHENOTYPE: {("disease", "phenotype")},
        GENE_PHENOTYPE: {("gene", "phenotype")},
        AFFECTS: {("drug", "gene")},
        SIDE_EFFECT: {("drug", "phenotype")},
        SUBCLASS: {("disease", "disease")},
    }
    out = _noise_edges(None, labels, 300, existing, np.random.default_rng(0))
    assert len(out) == len(set(out)) and 20 <= len(out) <= 300
    for h, r, t in out:
        assert h != t and (h, r, t) not in existing
        assert (_kind(h), _kind(t)) in kinds[r]
    assert {r for _, r, _ in out} == set(kinds)  # every schema drawn, the last one too
    assert _noise_edges(None, labels, 0, existing, np.random.default_rng(0)) == []


# ---- counts and files of a hand-built graph


def _hand_kg():
    pa = MechanismPath("target_gene_condition", ((D1, AFFECTS, G1), (G1, GENE_CONDITION, M1)))
    pb = MechanismPath("target_phenotype", ((D1, AFFECTS, G1), (G1, GENE_PHENOTYPE, P1), (M1, HAS_PHENOTYPE, P1)))
    pc = MechanismPath("target_gene_condition", ((D2, AFFECTS, G1), (G1, GENE_CONDITION, M1)))
    labels = [D1, D2, G1, M1, P1]
    cats = ["biolink:Drug", "biolink:Drug", "biolink:Gene", "biolink:Disease", "biolink:PhenotypicFeature"]
    return SyntheticKG(
        config=SyntheticConfig.quick(),
        seed=5,
        train=[
            (D1, AFFECTS, G1),
            (G1, GENE_CONDITION, M1),
            (D2, AFFECTS, G1),
            (G1, GENE_PHENOTYPE, P1),
            (M1, HAS_PHENOTYPE, P1),
            (D2, TREATS, M1),
            (D2, TREATS, P1),  # a noise treats edge, no mechanism
        ],
        valid=[(D2, AFFECTS, M1)],
        test=[(D1, TREATS, M1)],
        mechanisms={(D1, TREATS, M1): [pa, pb], (D2, TREATS, M1): [pc]},
        names={lab: f"name {i}" for i, lab in enumerate(labels)},
        categories=dict(zip(labels, cats)),
    )


HAND_COUNTS = {
    "entities": 5,
    "entities_by_category": {
        "biolink:Drug": 2,
        "biolink:Gene": 1,
        "biolink:Disease": 1,
        "biolink:PhenotypicFeature": 1,
    },
    "relations": 5,
    "train": 7,
    "valid": 1,
    "test": 1,
    "train_treats": 2,
    "train_treats_with_mechanism": 1,
    "valid_treats": 0,
    "test_mechanism_paths": 2,
    "test_triples_with_several_paths": 1,
    "test_paths_by_template": {"target_gene_condition": 1, "target_phenotype": 1},
}


def test_counts_of_a_hand_built_graph():
    counts = _hand_kg().counts()
    assert counts == HAND_COUNTS
    assert list(counts["entities_by_category"]) == list(HAND_COUNTS["entities_by_category"])


def test_write_lays_out_every_file_by_hand(tmp_path):
    kg = _hand_kg()
    assert write(kg, tmp_path) == HAND_COUNTS
    assert (tmp_path / "test.txt").read_text() == f"{D1}\t{TREATS}\t{M1}\n"
    assert (tmp_path / "valid.txt").read_text() == f"{D2}\t{AFFECTS}\t{M1}\n"
    assert (tmp_path / "train.txt").read_text().splitlines()[0] == f"{D1}\t{AFFECTS}\t{G1}"
    # ids in sorted label order: CHEBI:100001, CHEBI:100002, HP:..., MONDO:..., NCBIGene:...
    assert (tmp_path / "node_category.txt").read_text() == (
        "biolink:Drug\t0\nbiolink:Drug\t1\nbiolink:PhenotypicFeature\t2\nbiolink:Disease\t3\nbiolink:Gene\t4\n"
    )
    head = "test_head\ttest_relation\ttest_tail\tpath_id\ttemplate\tedge_head\tedge_relation\tedge_tail"
    t = f"{D1}\t{TREATS}\t{M1}"
    assert (tmp_path / "mechanisms.tsv").read_text() == (
        f"{head}\n"
        f"{t}\t0\ttarget_gene_condition\t{D1}\t{AFFECTS}\t{G1}\n"
        f"{t}\t0\ttarget_gene_condition\t{G1}\t{GENE_CONDITION}\t{M1}\n"
        f"{t}\t1\ttarget_phenotype\t{D1}\t{AFFECTS}\t{G1}\n"
        f"{t}\t1\ttarget_phenotype\t{G1}\t{GENE_PHENOTYPE}\t{P1}\n"
        f"{t}\t1\ttarget_phenotype\t{M1}\t{HAS_PHENOTYPE}\t{P1}\n"
    )
    doc = json.loads((tmp_path / "synthetic_config.json").read_text())
    assert doc["seed"] == 5 and doc["counts"] == HAND_COUNTS
    assert doc["config"]["n_drugs"] == 50 and doc["config"]["template_weights"]["target_phenotype"] == 0.15
    assert doc["templates"]["target_phenotype"] == [
        "biolink:affects (out) -> gene",
        "biolink:contributes_to (out) -> phenotype",
        "biolink:has_phenotype (in) -> disease",
    ]
    assert set(doc["templates"]) == set(TEMPLATES)
    rels = (tmp_path / "rel_dict.txt").read_text()
    assert TREATS in rels and "biolink:contributes_to" in rels
    names = (tmp_path / "node_name_dict.txt").read_text()
    assert "name 0" in names and "name 4" in names


# ---- a tiny generated graph


MINIMUM_RATES = dict(
    pathways_per_gene=1,
    interactions_per_gene=1,
    genes_per_disease=1,
    diseases_per_pathway=1,
    phenotypes_per_disease=1,
    genes_per_phenotype=1,
    targets_per_drug=1,
    binding_partners_per_drug=0,
    side_effects_per_drug=0,
    parents_per_disease=0,
    noise_edge_fraction=0.0,
    noise_treats_fraction=0.0,
    n_valid_other=0,
)


def _per(edges, pred, side):
    out = {}
    for e in edges:
        if e[1] == pred:
            out[e[side]] = out.get(e[side], 0) + 1
    return out


def test_rates_at_their_minimum_give_each_driver_exactly_the_minimum():
    cfg = SyntheticConfig.quick(treats_per_drug=1, n_test=5, n_valid_treats=2, **MINIMUM_RATES)
    kg = generate(cfg, 3)
    everything = kg.train + kg.valid + kg.test
    assert [r for _, r, _ in kg.valid + kg.test] == [TREATS] * 7  # nothing else held out
    genes = [g for g in kg.names if g.startswith("NCBIGene:")]
    assert len(genes) == 100
    assert sorted(_per(everything, PARTICIPATES, 0).values()) == [1] * 100  # each gene one pathway
    assert sorted(_per(everything, GENE_CONDITION, 2).values()) == [1] * 40  # each disease one gene
    assert sorted(_per(everything, PATHWAY_DISEASE, 0).values()) == [1] * 20
    assert sorted(_per(everything, HAS_PHENOTYPE, 0).values()) == [1] * 40
    assert sorted(_per(everything, GENE_PHENOTYPE, 2).values()) == [1] * 45
    assert sorted(_per(everything, AFFECTS, 0).values()) == [1] * 50
    assert not {SIDE_EFFECT, SUBCLASS} & {r for _, r, _ in everything}
    gene_gene = [(h, t) for h, r, t in everything if r == INTERACTS]
    assert all(_kind(h) == "gene" for h, _ in gene_gene)  # no drug binding partners
    assert all(h != t for h, t in gene_gene) and not {(t, h) for h, t in gene_gene} & set(gene_gene)
    assert 50 <= len(gene_gene) <= 100  # one per gene, a mutual pair stored once
    # one walk per drug: at most one planted treats edge each, every one with its mechanism
    treats = [(h, t) for h, r, t in everything if r == TREATS]
    assert len(treats) == len(kg.mechanisms) <= 50
    assert len({h for h, _ in treats}) == len(treats)


def test_drugs_reach_only_the_druggable_genes():
    kg = generate(SyntheticConfig.quick(druggable_fraction=0.01, **MINIMUM_RATES), 1)
    # max(2, round(0.01 * 100)) = 2 druggable genes
    assert len({t for _, r, t in kg.train if r == AFFECTS}) == 2
    kg = generate(
        SyntheticConfig.quick(
            druggable_fraction=0.06,
            targets_per_drug=4,
            **{k: v for k, v in MINIMUM_RATES.items() if k != "targets_per_drug"},
        ),
        1,
    )
    assert len({t for _, r, t in kg.train if r == AFFECTS}) == 6  # round(0.06 * 100)


def test_splits_have_the_configured_sizes_and_valid_edges_lie_off_every_mechanism():
    cfg = SyntheticConfig.quick(n_test=7, n_valid_treats=3, n_valid_other=11)
    kg = generate(cfg, 2)
    assert len(kg.test) == 7 and all(r == TREATS for _, r, _ in kg.test)
    assert sum(r == TREATS for _, r, _ in kg.valid) == 3 and len(kg.valid) == 14
    on_mechanism = {e for ps in kg.mechanisms.values() for p in ps for e in p.edges}
    assert not on_mechanism & set(kg.valid)
    assert set(kg.test) <= set(kg.mechanisms)
    # the train file is shuffled, not grouped by relation
    rels = [r for _, r, _ in kg.train]
    assert sum(a != b for a, b in zip(rels, rels[1:])) > len(rels) / 2
    # noise treats edges are train only, without a mechanism
    noisy = [e for e in kg.train if e[1] == TREATS and e not in kg.mechanisms]
    assert 1 <= len(noisy) <= round(0.05 * len(kg.mechanisms))


def test_too_many_held_out_edges_are_refused_word_for_word():
    base = dict(treats_per_drug=1, **MINIMUM_RATES)
    planted = len(generate(SyntheticConfig.quick(n_test=1, n_valid_treats=1, **base), 4).mechanisms)
    # the held-out edges must leave at least one planted edge for training
    generate(SyntheticConfig.quick(n_test=planted - 2, n_valid_treats=1, **base), 4)
    with pytest.raises(TracegraphError) as e:
        generate(SyntheticConfig.quick(n_test=planted - 1, n_valid_treats=1, **base), 4)
    assert str(e.value) == (
        f"only {planted} planted treats edges for {planted} held-out ones: "
        "raise n_drugs or treats_per_drug, or lower n_test / n_valid_treats"
    )


def test_no_config_means_the_defaults():
    a, b = generate(), generate(SyntheticConfig(), 0)  # no seed means seed 0
    assert a.config == SyntheticConfig() and a.train == b.train and a.test == b.test and a.seed == 0


# ---- later tests: counts and files with more paths, the background's partners, template weights


def test_counts_and_mechanism_ids_with_three_test_paths(tmp_path):
    kg = _hand_kg()
    kg.test = [(D1, TREATS, M1), (D2, TREATS, M1)]  # 2 + 1 paths
    kg.train = [e for e in kg.train if e != (D2, TREATS, M1)] + [(D1, TREATS, P1)]  # 2 treats, none planted
    counts = write(kg, tmp_path)
    assert counts["train_treats"] == 2 and counts["train_treats_with_mechanism"] == 0
    assert counts["test_mechanism_paths"] == 3 and counts["test_triples_with_several_paths"] == 1
    assert counts["test_paths_by_template"] == {"target_gene_condition": 2, "target_phenotype": 1}
    rows = (tmp_path / "mechanisms.tsv").read_text().splitlines()[1:]
    assert [r.split("\t")[3] for r in rows] == ["0", "0", "1", "1", "1", "2", "2"]
    assert (tmp_path / "node_dict.txt").read_text() == f"{D1}\t0\n{D2}\t1\n{P1}\t2\n{M1}\t3\n{G1}\t4\n"


SCHEMA_KINDS = {
    PARTICIPATES: {("gene", "pathway")},
    INTERACTS: {("gene", "gene"), ("drug", "gene")},
    GENE_CONDITION: {("gene", "disease")},
    PATHWAY_DISEASE: {("pathway", "disease")},
    HAS_PHENOTYPE: {("disease", "phenotype")},
    GENE_PHENOTYPE: {("gene", "phenotype")},
    AFFECTS: {("drug", "gene")},
    SIDE_EFFECT: {("drug", "phenotype")},
    SUBCLASS: {("disease", "disease")},
    TREATS: {("drug", "disease")},
}


def test_every_edge_joins_the_kinds_of_its_schema():
    kg = generate(SyntheticConfig.quick(noise_edge_fraction=0.0), 0)
    for h, r, t in kg.train + kg.valid + kg.test:
        assert (_kind(h), _kind(t)) in SCHEMA_KINDS[r], (h, r, t)


def test_full_coherence_keeps_every_edge_inside_a_module():
    import networkx as nx

    cfg = SyntheticConfig.quick(
        n_modules=10, module_coherence=1.0, druggable_fraction=1.0, noise_edge_fraction=0.0, noise_treats_fraction=0.0
    )
    kg = generate(cfg, 0)
    g = nx.Graph((h, t) for h, _, t in kg.train + kg.valid + kg.test)
    # balanced modules: each holds entities of every kind, and no edge leaves one
    assert nx.number_connected_components(g) >= 10
    kg = generate(SyntheticConfig.quick(n_modules=10, module_coherence=0.0, noise_edge_fraction=0.0), 0)
    assert nx.number_connected_components(nx.Graph((h, t) for h, _, t in kg.train)) < 10


def test_a_driver_draws_distinct_partners_up_to_all_of_them():
    # each gene wants ~30 pathways of 2, and ~30 interactors of 4: it gets every one, once
    for seed in range(4):
        cfg = SyntheticConfig.quick(
            n_genes=5, n_pathways=2, pathways_per_gene=30, interactions_per_gene=30, n_test=2, n_valid_treats=1
        )
        cfg.n_valid_other = 0
        cfg.noise_edge_fraction = 0.0
        kg = generate(cfg, seed)
        edges = kg.train + kg.valid + kg.test
        assert sorted(_per(edges, PARTICIPATES, 0).values()) == [2] * 5
        pairs = [frozenset((h, t)) for h, r, t in edges if r == INTERACTS and _kind(h) == "gene"]
        assert len(pairs) == len(set(pairs)) == 10  # every pair of 5 genes, stored once, no self-loop


def test_only_templates_with_positive_weight_are_walked_in_proportion():
    kg = generate(SyntheticConfig.quick(template_weights={"target_phenotype": 1.0}), 0)
    assert {p.template for ps in kg.mechanisms.values() for p in ps} == {"target_phenotype"}
    kg = generate(SyntheticConfig.quick(template_weights={"target_phenotype": 0, "target_gene_condition": 2}), 0)
    assert {p.template for ps in kg.mechanisms.values() for p in ps} == {"target_gene_condition"}
    # integer weights 1 : 9 (not summing to 1)
    kg = generate(SyntheticConfig.quick(template_weights={"target_gene_condition": 1, "target_phenotype": 9}), 0)
    templates = [p.template for ps in kg.mechanisms.values() for p in ps]
    assert templates.count("target_phenotype") / len(templates) > 0.75


def test_treats_per_drug_sets_the_walks_per_drug():
    kg = generate(SyntheticConfig.quick(treats_per_drug=2, n_test=5, n_valid_treats=2), 0)
    per_drug = _per(list(kg.mechanisms), TREATS, 0)
    assert max(per_drug.values()) >= 2  # 1 + Poisson(1) walks: some drug reaches two diseases


class Counting:
    """Lowest draws everywhere, counting the template choices."""

    choices = 0

    def poisson(self, lam):
        return 0

    def choice(self, n, p=None):
        self.choices += 1
        return 0

    def integers(self, n):
        return 0

    def random(self):
        return 0.0


def test_a_walk_that_dead_ends_is_tried_twenty_times():
    cfg = SyntheticConfig.quick(treats_per_drug=1, template_weights={"target_gene_condition": 1.0})
    rng = Counting()
    got = plant_treatments(cfg, {"drug": [D1]}, [(D1, AFFECTS, G2)], SALIENCE, rng)  # G2: no disease
    assert got == {} and rng.choices == 20


class Scripted(Counting):
    """Template choices scripted in order; Poisson draws scripted too."""

    def __init__(self, choices, poissons):
        self._c, self._p = list(choices), list(poissons)

    def poisson(self, lam):
        return self._p.pop(0)

    def choice(self, n, p=None):
        self.choices += 1
        return self._c.pop(0)


def test_a_walk_given_up_does_not_stop_the_drugs_other_walks():
    weights = {"target_gene_condition": 0.5, "target_phenotype": 0.5}
    cfg = SyntheticConfig.quick(template_weights=weights)
    background = [(D1, AFFECTS, G2), (G2, GENE_PHENOTYPE, P1), (M2, HAS_PHENOTYPE, P1)]
    rng = Scripted([0] * 20 + [1], [1])  # two walks: the first dead-ends 20 times, the second succeeds
    got = plant_treatments(cfg, {"drug": [D1]}, background, SALIENCE, rng)
    assert got == {(D1, TREATS, M2): [MechanismPath("target_phenotype", tuple(background))]}


def test_noise_treats_draw_diseases_by_popularity_and_skip_planted_pairs():
    from tracegraph.kg.demo.synthetic import _noise_treats

    labels = {"drug": [D1, D2], "disease": [M1, M2]}
    cfg = SimpleNamespace(noise_treats_fraction=0.5)
    pop = {"disease": np.array([0.0, 1.0])}
    got = _noise_treats(cfg, labels, pop, set(), 40, np.random.default_rng(0))  # 20 draws, all M2
    assert sorted(got) == [(D1, TREATS, M2), (D2, TREATS, M2)]
    assert _noise_treats(cfg, labels, pop, {(D1, TREATS, M2)}, 40, np.random.default_rng(0)) == [(D2, TREATS, M2)]


def test_held_out_edges_count_both_ends_and_never_hold_out_treats():
    e1, e2, e3 = ("A", "r", "B"), ("C", "r", "B"), ("A", "r", "C")
    # degrees A 2, B 2, C 2: e1 taken leaves A 1, B 1, so e2 and e3 stay
    assert _hold_out_edges([e1, e2, e3], set(), 3, Draws()) == [e1]
    t, f1, f2 = ("A", TREATS, "B"), ("A", "r", "B"), ("B", "r", "A")
    assert _hold_out_edges([t, f1, f2], set(), 1, Draws()) == [f1]


def test_generated_categories_are_the_biolink_categories_by_kind():
    kg = generate(SyntheticConfig.quick(), 0)
    expected = {
        "drug": "biolink:Drug",
        "gene": "biolink:Gene",
        "pathway": "biolink:Pathway",
        "disease": "biolink:Disease",
        "phenotype": "biolink:PhenotypicFeature",
    }
    assert len(kg.categories) == 255 and set(kg.categories) == set(kg.names)
    assert all(cat == expected[_kind(lab)] for lab, cat in kg.categories.items())
    assert kg.categories["CHEBI:100001"] == "biolink:Drug" and kg.categories["REACT:R-HSA-0020"] == "biolink:Pathway"


def test_noise_adds_about_the_noise_fraction_of_the_background():
    base = dict(noise_treats_fraction=0.0, n_valid_other=0)
    clean = generate(SyntheticConfig.quick(noise_edge_fraction=0.0, **base), 0)
    noisy = generate(SyntheticConfig.quick(noise_edge_fraction=0.2, **base), 0)

    def others(kg):
        return [e for e in kg.train + kg.valid + kg.test if e[1] != TREATS]

    background = len(others(clean))
    added = len(others(noisy)) - background  # the same background: drawn before the noise
    assert 0.8 * round(0.2 * background) <= added <= round(0.2 * background)


def test_popularity_with_an_integer_exponent():
    w = _zipf_weights(4, 1, np.random.default_rng(0))
    h = 1 + 1 / 2 + 1 / 3 + 1 / 4
    assert np.allclose(np.sort(w), [1 / 4 / h, 1 / 3 / h, 1 / 2 / h, 1 / h], rtol=1e-12)


def test_a_walk_is_simple_and_takes_the_most_salient_partner_not_the_largest_label():
    nb = _Neighbours([(D1, AFFECTS, G1), (G1, GENE_CONDITION, M1), (G1, GENE_CONDITION, M2), (G1, INTERACTS, G3)])
    salience = {D1: 0.0, G1: 0.5, G3: 0.5, M1: 0.9, M2: 0.1}
    steps = TEMPLATES["target_gene_condition"]
    assert _walk(D1, steps, nb, salience, 1.0, Draws([0], [0.0]))[-1] == (G1, GENE_CONDITION, M1)
    # gene, gene, gene: from G3 the only gene is G1, already walked: a dead end
    there_and_back = ((AFFECTS, "out", "gene"), (INTERACTS, "both", "gene"), (INTERACTS, "both", "gene"))
    assert _walk(D1, there_and_back, nb, salience, 1.0, Draws([0], [0.0, 0.0])) is None
    assert _end_of(D1, ((D1, AFFECTS, G1), (G1, GENE_CONDITION, M1))) == M1


def test_a_walk_keeps_to_the_kind_asked_for():
    # from G3, interacts_with reaches D2 (a drug, unvisited, most salient) and G1 (a gene)
    nb = _Neighbours([(D1, INTERACTS, G3), (D2, INTERACTS, G3), (G1, INTERACTS, G3), (G1, GENE_CONDITION, M1)])
    salience = {D1: 0.0, D2: 0.99, G1: 0.5, G3: 0.5, M1: 0.2}
    got = _walk(D1, TEMPLATES["binding_partner_condition"], nb, salience, 1.0, Draws([0], [0.0, 0.0]))
    assert got == ((D1, INTERACTS, G3), (G1, INTERACTS, G3), (G1, GENE_CONDITION, M1))


def test_held_out_edges_lower_each_end_by_one():
    # B has degree 3: after (A, r, B) is held out it has 2 left, so (C, r, B) may go too;
    # A and C keep (A, r, C) and (C, r, D)... D has (C, r, D) and (D, r, A)
    edges = [("A", "r", "B"), ("C", "r", "B"), ("B", "r", "D"), ("A", "r", "C"), ("C", "r", "D"), ("D", "r", "A")]
    # degrees A 3, B 3, C 3, D 3; e1: A 2, B 2; e2: C 2, B 1; e3: B 1 skip; e4: A 1, C 1;
    # e5: C 1 skip; e6: D 3, A 1 skip
    assert _hold_out_edges(edges, set(), 6, Draws()) == [edges[0], edges[1], edges[3]]
