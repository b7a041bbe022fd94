"""Word-level language models in the style of pytorch/examples' word_language_model.

Both take token ids laid out sequence-first, (T, B), as that example's batchify() makes
them; the recurrent model also takes and returns its hidden state, (layers, B, H), which
the training loop carries from one chunk of text to the next. Written for dpcheck's
real-model suite; the examples are in word_language_model_examples.py.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class RNNModel(nn.Module):
    """Embedding, a stacked recurrent layer (LSTM, GRU or plain RNN), and a linear decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        elif rnn_type in ("RNN_TANH", "RNN_RELU"):
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=rnn_type[4:].lower(), dropout=dropout)
        else:
            raise ValueError(f"unknown rnn_type {rnn_type!r}: use LSTM, GRU, RNN_TANH or RNN_RELU")
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:  # share the input and output embeddings (Press & Wolf 2016)
            if nhid != ninp:
                raise ValueError("tied weights need nhid == ninp")
            self.decoder.weight = self.encoder.weight
        self.reset_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def reset_weights(self, scale=0.1):
        nn.init.uniform_(self.encoder.weight, -scale, scale)
        nn.init.uniform_(self.decoder.weight, -scale, scale)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input, hidden):
        embedded = self.drop(self.encoder(input))
        output, hidden = self.rnn(embedded, hidden)
        logits = self.decoder(self.drop(output))
        # Flattened time-major, (T * B, ntoken), as the example's NLLLoss expects.
        return F.log_softmax(logits.view(-1, self.ntoken), dim=1), hidden

    def init_hidden(self, bsz):
        """Zeros shaped (layers, bsz, nhid), on the parameters' device (called by the training loop)."""
        weight = next(self.parameters())
        shape = (self.nlayers, bsz, self.nhid)
        if self.rnn_type == "LSTM":
            return weight.new_zeros(shape), weight.new_zeros(shape)
        return weight.new_zeros(shape)


class PositionalEncoding(nn.Module):
    """Adds fixed sine/cosine position signals to sequence-first embeddings (T, B, d_model)."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        frequency = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)
        self.register_buffer("pe", table.unsqueeze(1))  # (max_len, 1, d_model): broadcasts over the batch

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(0)])


class TransformerModel(nn.Transformer):
    """A causal Transformer encoder over sequence-first token ids, with a linear decoder.

    Like the example it subclasses nn.Transformer (whose decoder stack goes unused) and
    caches the causal mask on self between calls.
    """

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                         num_decoder_layers=1, dropout=dropout)
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.reset_weights()

    @staticmethod
    def causal_mask(size):
        """(size, size) float mask: 0 on and below the diagonal, -inf above it."""
        allowed = torch.tril(torch.ones(size, size, dtype=torch.bool))
        return torch.zeros(size, size).masked_fill(~allowed, float("-inf"))

    def reset_weights(self, scale=0.1):
        nn.init.uniform_(self.input_emb.weight, -scale, scale)
        nn.init.uniform_(self.decoder.weight, -scale, scale)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = self.causal_mask(len(src)).to(src.device)
        else:
            self.src_mask = None
        hidden = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
        hidden = self.encoder(hidden, mask=self.src_mask)
        return F.log_softmax(self.decoder(hidden), dim=-1)
