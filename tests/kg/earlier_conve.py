"""A checkpoint in the original research scripts' format, written by an independent reference
model, for the importer's tests."""

import torch
from torch import nn


class EarlierConvE(nn.Module):
    """Reference for the original research scripts' ConvE: head and relation concatenated along the *width*
    (an H×2W image), no entity bias, scores = x·Eᵀ. Its state-dict keys define the earlier format."""

    def __init__(
        self,
        num_entities,
        num_relations,
        embedding_dim,
        embedding_height,
        embedding_width,
        output_channels=8,
        kernel_size=3,
    ):
        super().__init__()
        self.H, self.W = embedding_height, embedding_width
        self.entity_embeddings = nn.Embedding(num_entities, embedding_dim)
        self.relation_embeddings = nn.Embedding(num_relations, embedding_dim)
        self.inp_drop, self.hidden_drop, self.feature_map_drop = nn.Dropout(0.2), nn.Dropout(0.3), nn.Dropout2d(0.2)
        self.conv1 = nn.Conv2d(1, output_channels, kernel_size, 1, 0, bias=True)
        self.bn0, self.bn1, self.bn2 = nn.BatchNorm2d(1), nn.BatchNorm2d(output_channels), nn.BatchNorm1d(embedding_dim)
        flat = output_channels * (embedding_height - kernel_size + 1) * (2 * embedding_width - kernel_size + 1)
        self.fc = nn.Linear(flat, embedding_dim)

    def forward(self, heads, relations):
        e = self.entity_embeddings(heads).view(-1, 1, self.H, self.W)
        r = self.relation_embeddings(relations).view(-1, 1, self.H, self.W)
        x = self.bn0(torch.cat([e, r], 3))
        x = self.conv1(self.inp_drop(x))
        x = self.feature_map_drop(torch.relu(self.bn1(x)))
        x = self.fc(x.view(x.shape[0], -1))
        x = torch.relu(self.bn2(self.hidden_drop(x)))
        return x @ self.entity_embeddings.weight.t()


def earlier_checkpoint(tmp_path, n_ent=40, n_rel=6, rows=None, seed=0):
    """Write ``old.pt`` (random weights, BatchNorm statistics away from 0/1) and its id maps in
    ``tmp_path``; returns the reference model and the checkpoint's path."""
    torch.manual_seed(seed)
    cfg = {
        "num_entities": n_ent,
        "num_relations": rows or n_rel,
        "embedding_dim": 24,
        "embedding_height": 4,
        "embedding_width": 6,
    }
    ref = EarlierConvE(**cfg)
    with torch.no_grad():
        for m in ref.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_()
                m.running_mean.normal_()
                m.running_var.uniform_(0.5, 2.0)
    ref.eval()
    f = tmp_path / "old.pt"
    torch.save(
        {
            "model_state_dict": ref.state_dict(),
            "model_config": cfg,
            "epoch": 7,
            "optimizer_state_dict": {"param_groups": [{"lr": 0.003}]},
        },
        f,
    )
    (tmp_path / "node_dict.txt").write_text("".join(f"E{i}\t{i}\n" for i in range(n_ent)))
    (tmp_path / "rel_dict.txt").write_text("".join(f"R{i}\t{i}\n" for i in range(n_rel)))
    return ref, f
