"""Written with DataParallel in mind: nothing here should be flagged."""
import torch
import torch.nn as nn


class Careful(nn.Module):
    def __init__(self, n=8):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(n, n) for _ in range(2))
        self.register_buffer("causal", torch.tril(torch.ones(n, n)), persistent=False)
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))
        self.head = nn.Linear(n, 1)
        self.dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.history = []

    def log(self, value):
        self.history.append(value)

    def forward(self, x, lengths):
        self.updates += 1
        steps = torch.arange(x.shape[1], device=x.device)
        keep = (steps[None, :] < lengths[:, None]).to(x.dtype)
        for block in self.blocks:
            x = torch.relu(block(x)) @ self.causal
        pooled = (x * keep[..., None]).sum(dim=1) / keep.sum(dim=1, keepdim=True).clamp(min=1)
        return self.head(pooled).squeeze(-1), x.new_zeros(x.shape[0])
