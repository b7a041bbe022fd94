"""transformers GPT2LMHeadModel from a tiny GPT2Config, with labels (the inputs, shifted inside).

With `labels` the model returns its loss as a 0-dim tensor inside the output: DataParallel
gathers it into one loss per replica (the hazard; HF's Trainer calls `.mean()` on it).
`use_cache=False`, as in training.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB, SEQ_LEN = 100, 8


def dpcheck_example(batch_size=4):
    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ_LEN * 2, n_embd=32, n_layer=2, n_head=2,
                        use_cache=False)
    model = GPT2LMHeadModel(config)
    input_ids = torch.randint(0, VOCAB, (batch_size, SEQ_LEN))
    return model, (input_ids,), {"labels": input_ids}
