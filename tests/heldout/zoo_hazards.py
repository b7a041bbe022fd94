import functools

import torch
from torch import nn as tnn
from torch.nn import Module, LSTM
from torch.nn.utils import rnn as rnn_utils
import torch.nn.functional as fn

FEATURES = {}


def grab(name):
    def hook(module, inputs, output):
        FEATURES[name] = output.detach()
    return hook


class Speech(Module):
    def __init__(self):
        super().__init__()
        self.enc = LSTM(40, 32)
        self.proj = tnn.Linear(32, 10)
        self.norm = tnn.BatchNorm1d(10)
        self.proj.register_forward_hook(grab("proj"))
        self.act = functools.partial(self._gelu, approximate="tanh")
        self.extra = None

    def _gelu(self, x, approximate):
        return fn.gelu(x, approximate=approximate)

    def forward(self, feats, lengths):
        packed = rnn_utils.pack_padded_sequence(feats, lengths.cpu(), enforce_sorted=False)
        out, (h, c) = self.enc(packed)
        out, _ = rnn_utils.pad_packed_sequence(out)
        logits = self.act(self.proj(out))
        if self.extra is None:
            self.extra = tnn.Linear(10, 10)
        keep = logits.max(-1).values > 0
        words = torch.tensor([0, 1, 2])
        return {"logits": self.extra(logits).squeeze(), "h": h, "kept": logits[keep], "vocab": words.cpu()}
