"""ConvE's options by hand on a tiny model: the configuration's refusals word for word, labels refused
with their message, no entity bias when asked (scores the plain dot product, written here), the
embedding dropouts (p = 1 zeroes what they drop: the encoder then sees zeros), and gradient
checkpointing (off by default; on, the same output, gradients and BatchNorm statistics as one pass, the
encoder run again in backward only), feature-map dropout 1, a recorded forward layer by layer, and logits
in the hidden vectors' dtype (float64, bfloat16 autocast)."""

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


def test_feature_map_dropout_of_one_drops_every_map_in_training():
    """At p = 1 every feature map is dropped: the fully connected layer sees zeros, every row of the
    batch is its bias, BatchNorm centres them to 0, and the hidden vectors are ReLU of bn2's shift."""
    torch.manual_seed(0)
    model = ConvE(ConvEConfig(**SMALL, input_dropout=0.0, output_dropout=0.0, feature_map_dropout=1.0)).train()
    with torch.no_grad():
        model.bn2.bias.copy_(torch.linspace(-1, 1, 12))
    x = model.encode(torch.randn(4, 12), torch.randn(4, 12))
    torch.testing.assert_close(x, torch.linspace(-1, 1, 12).clamp(min=0).expand(4, 12))


def test_a_recorded_forward_holds_every_layer_and_the_hidden_vector():
    """``record`` gets each layer's input and output under its name (TracIn takes per-example
    gradients there), each the layer applied to the one before (eval mode, worked here from the
    modules), and ``x`` is the vector returned."""
    torch.manual_seed(0)
    model = ConvE(ConvEConfig(**SMALL)).eval()
    e, r = torch.randn(3, 12), torch.randn(3, 12)
    rec: dict = {}
    with torch.no_grad():
        x = model.encode(e, r, record=rec)
        assert set(rec) == {"image", "conv_in", "conv_out", "bn1_out", "fc_in", "fc_out", "bn2_out", "x"}
        assert rec["x"] is x
        image = torch.cat([e.reshape(3, 1, 3, 4), r.reshape(3, 1, 3, 4)], dim=2)
        torch.testing.assert_close(rec["image"], image)
        torch.testing.assert_close(rec["conv_in"], model.bn0(image))
        torch.testing.assert_close(rec["conv_out"], model.conv(rec["conv_in"]))
        torch.testing.assert_close(rec["bn1_out"], model.bn1(rec["conv_out"]))
        torch.testing.assert_close(rec["fc_in"], torch.relu(rec["bn1_out"]).flatten(1))
        torch.testing.assert_close(rec["fc_out"], model.fc(rec["fc_in"]))
        torch.testing.assert_close(rec["bn2_out"], model.bn2(rec["fc_out"]))
        torch.testing.assert_close(x, torch.relu(rec["bn2_out"]))


@pytest.mark.parametrize("checkpointing, passes", [(False, 1), (True, 2)])
def test_checkpointing_recomputes_the_encoder_in_backward_only_when_on(checkpointing, passes):
    """A training step runs the encoder once; with gradient checkpointing, once more in backward."""
    torch.manual_seed(0)
    model = ConvE(ConvEConfig(**SMALL, **NO_DROPOUT)).train()
    model.gradient_checkpointing = checkpointing
    calls = []
    encode = model.encode
    model.encode = lambda *a, **k: calls.append(1) or encode(*a, **k)
    model.encode_embeddings(torch.randn(4, 12, requires_grad=True), torch.randn(4, 12)).sum().backward()
    assert len(calls) == passes


def test_a_checkpointed_forward_without_backward_moves_batchnorm_once():
    """Forward alone (no backward, so no recomputation) leaves every BatchNorm statistic as one
    plain pass does: one batch counted, running means moved."""
    torch.manual_seed(0)
    plain = ConvE(ConvEConfig(**SMALL, **NO_DROPOUT)).train()
    ckpt = copy.deepcopy(plain)
    ckpt.gradient_checkpointing = True
    e, r = torch.randn(5, 12, requires_grad=True), torch.randn(5, 12)
    plain.encode_embeddings(e, r)
    ckpt.encode_embeddings(e, r)
    for k, v in plain.state_dict().items():
        torch.testing.assert_close(ckpt.state_dict()[k], v, msg=k)
    assert int(ckpt.bn1.num_batches_tracked) == 1
    assert not torch.equal(ckpt.bn1.running_mean, torch.zeros(ckpt.bn1.num_features))


def test_scores_come_in_the_dtype_of_the_hidden_vectors():
    """Hidden vectors in another precision than the tables are scored in theirs: float64 ones give
    float64 logits equal to a float64 reference; under CPU autocast (bfloat16) every scoring call
    returns bfloat16 logits, within bfloat16 rounding of float64."""
    torch.manual_seed(0)
    model = ConvE(ConvEConfig(**SMALL, **NO_DROPOUT)).eval()
    with torch.no_grad():
        model.entity_bias.copy_(torch.linspace(-0.5, 0.5, 6))
        h, r, t = torch.tensor([0, 3]), torch.tensor([1, 0]), torch.tensor([5, 2])
        x = model.hidden(h, r).double()
        want = x @ model.entity.weight.double().t() + model.entity_bias.double()
        got = model.score_hidden(x)
        assert got.dtype == torch.float64
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            all_scores, triples = model.score_all(h, r), model.score_triples(h, r, t)
            part = model.score_hidden(model.hidden(h, r), 1, 4)
        assert all_scores.dtype == triples.dtype == part.dtype == torch.bfloat16
        torch.testing.assert_close(all_scores.double(), want, rtol=0.05, atol=0.05)
        torch.testing.assert_close(triples.double(), want[[0, 1], [5, 2]], rtol=0.05, atol=0.05)
        torch.testing.assert_close(part.double(), want[:, 1:4], rtol=0.05, atol=0.05)


@pytest.mark.parametrize("reciprocal, rows", [(True, 4), (False, 2)])
def test_the_relation_table_doubles_only_for_reciprocal_relations(reciprocal, rows):
    config = ConvEConfig(**SMALL, reciprocal=reciprocal)
    assert config.num_relation_rows == rows
    assert ConvE(config).relation.weight.shape == (rows, 12)
