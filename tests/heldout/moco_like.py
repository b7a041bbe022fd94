import torch
import torch.nn as nn
import torch.nn.functional as F


class Queue(nn.Module):
    def __init__(self, dim=8, size=32):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.register_buffer("bank", F.normalize(torch.randn(dim, size), dim=0))
        self.register_buffer("cursor", torch.zeros(1, dtype=torch.long))
        self.seen = []

    @torch.no_grad()
    def _push(self, keys):
        n = keys.shape[0]
        start = int(self.cursor)
        self.bank[:, start:start + n] = keys.T
        self.cursor[0] = (start + n) % self.bank.shape[1]

    def forward(self, a, b):
        q = F.normalize(self.q(a), dim=1)
        k = F.normalize(self.k(b), dim=1)
        self._push(k)
        self.seen.append(a.shape[0])
        return torch.cat([(q * k).sum(1, keepdim=True), q @ self.bank], dim=1)
