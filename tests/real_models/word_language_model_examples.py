"""`--examples` file for word_language_model.py: dpcheck_example_<ClassName>(batch_size).

Inputs are laid out as the example's training loop feeds them: token ids (T, B), and for
the recurrent model the hidden state from init_hidden(B). Small sizes, random weights.
"""

import torch
from word_language_model import RNNModel, TransformerModel

NTOKEN, SEQ_LEN = 50, 6


def dpcheck_example_RNNModel(batch_size=4):
    model = RNNModel("LSTM", NTOKEN, ninp=16, nhid=16, nlayers=2, dropout=0.2)
    tokens = torch.randint(0, NTOKEN, (SEQ_LEN, batch_size))
    return model, (tokens, model.init_hidden(batch_size))


def dpcheck_example_TransformerModel(batch_size=4):
    model = TransformerModel(NTOKEN, ninp=16, nhead=2, nhid=32, nlayers=2, dropout=0.2)
    return model, (torch.randint(0, NTOKEN, (SEQ_LEN, batch_size)),)
