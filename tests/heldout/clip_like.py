import torch
from torch import nn
from torch.nn import functional as F


class TextTower(nn.Module):
    def __init__(self, vocab=100, width=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.rnn = nn.GRU(width, width, batch_first=True)

    def forward(self, ids):
        out, h = self.rnn(self.tok(ids))
        return out[:, -1]


class DualEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.image = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 16))
        self.text = TextTower()
        self.logit_scale = nn.Parameter(torch.tensor(2.0))
        self.last_logits = None

    def forward(self, images, ids):
        img = F.normalize(self.image(images), dim=-1)
        txt = F.normalize(self.text(ids), dim=-1)
        logits = self.logit_scale.exp() * img @ txt.t()
        self.last_logits = logits.detach()
        target = torch.arange(images.size(0), device=images.device)
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target)) / 2
