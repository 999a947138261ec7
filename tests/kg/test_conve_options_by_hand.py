"""ConvE's options by hand on a tiny model: the configuration's refusals word for word, labels refused
with their message, no entity bias when asked (scores the plain dot product, written here), the
embedding dropouts (p = 1 zeroes what they drop: the encoder then sees zeros), and gradient
checkpointing (off by default; on, the same output, gradients and BatchNorm statistics as one pass)."""

import copy

import pytest
import torch

from tracegraph.errors import TracegraphError
from tracegraph.kg.model.conve import ConvE, ConvEConfig

SMALL = dict(num_entities=6, num_relations=2, embedding_dim=12, embedding_height=3, embedding_width=4)
NO_DROPOUT = dict(input_dropout=0.0, feature_map_dropout=0.0, output_dropout=0.0)


def test_configuration_refusals_word_for_word():
    with pytest.raises(TracegraphError) as e:
        ConvEConfig(**SMALL, concat_axis="diagonal")
    assert str(e.value) == "concat_axis must be 'height' or 'width'"
    with pytest.raises(TracegraphError) as e:
        ConvEConfig(
            num_entities=6, num_relations=2, embedding_dim=4, embedding_height=2, embedding_width=2, kernel_size=5
        )
    assert str(e.value) == "kernel size 5 larger than the 4×2 input image"


def test_labels_are_refused_with_the_way_to_score_them():
    model = ConvE(ConvEConfig(**SMALL))
    for heads, rels in ((["a"], ["r"]), (torch.tensor([0]), ["r"]), (["a"], torch.tensor([0]))):
        with pytest.raises(TypeError) as e:
            model.hidden(heads, rels)
        assert str(e.value) == (
            "ConvE scores id tensors, not labels: use run.predict / run.score (tracegraph.open_run), "
            "or torch.as_tensor(run.entities.ids([...]))"
        )


def test_without_entity_bias_a_score_is_the_plain_dot_product():
    torch.manual_seed(0)
    model = ConvE(ConvEConfig(**SMALL, **NO_DROPOUT, entity_bias=False)).eval()
    assert model.entity_bias is None and "entity_bias" not in model.state_dict()
    assert model.conv.bias is not None and not model.gradient_checkpointing  # the defaults
    h, r, t = torch.tensor([0, 3]), torch.tensor([1, 0]), torch.tensor([5, 2])
    with torch.no_grad():
        x = model.hidden(h, r).double()
        want = (x * model.entity.weight[t].double()).sum(-1)
        torch.testing.assert_close(model.score_triples(h, r, t).double(), want, rtol=1e-5, atol=1e-6)
        all_scores = model.score_all(h, r).double()
        torch.testing.assert_close(all_scores, x @ model.entity.weight.double().t(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("which", ["entity", "relation"])
def test_embedding_dropout_applies_in_training_only(which):
    torch.manual_seed(0)
    model = ConvE(ConvEConfig(**SMALL, **NO_DROPOUT, **{f"{which}_dropout": 1.0})).train()
    e, r = torch.randn(4, 12), torch.randn(4, 12)
    dropped = (torch.zeros_like(e), r) if which == "entity" else (e, torch.zeros_like(r))
    torch.testing.assert_close(model.encode_embeddings(e, r), model.encode(*dropped))
    model.eval()
    torch.testing.assert_close(model.encode_embeddings(e, r), model.encode(e, r))


def test_gradient_checkpointing_gives_one_pass_output_gradients_and_statistics():
    torch.manual_seed(0)
    plain = ConvE(ConvEConfig(**SMALL, **NO_DROPOUT)).train()
    ckpt = copy.deepcopy(plain)
    ckpt.gradient_checkpointing = True
    e, r = torch.randn(5, 12), torch.randn(5, 12)
    outs = []
    for m in (plain, ckpt):
        ea, ra = e.clone().requires_grad_(True), r.clone().requires_grad_(True)
        y = m.encode_embeddings(ea, ra)
        (y * torch.arange(12.0)).sum().backward()
        outs.append((y.detach(), ea.grad, ra.grad, {k: v.clone() for k, v in m.state_dict().items()}))
    (y1, ge1, gr1, s1), (y2, ge2, gr2, s2) = outs
    torch.testing.assert_close(y2, y1)
    torch.testing.assert_close(ge2, ge1)
    torch.testing.assert_close(gr2, gr1)
    for k in s1:  # BatchNorm's running statistics and batch count as after one forward pass
        torch.testing.assert_close(s2[k], s1[k], msg=k)
