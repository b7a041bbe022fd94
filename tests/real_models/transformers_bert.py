"""transformers BertForSequenceClassification from a tiny BertConfig, with labels.

With `labels` the model returns its loss as a 0-dim tensor inside the output: DataParallel
gathers it into one loss per replica (the hazard; HF's Trainer calls `.mean()` on it).
"""

import torch
from transformers import BertConfig, BertForSequenceClassification

VOCAB, SEQ_LEN = 100, 8


def dpcheck_example(batch_size=4):
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=SEQ_LEN * 2, num_labels=3)
    model = BertForSequenceClassification(config)
    input_ids = torch.randint(0, VOCAB, (batch_size, SEQ_LEN))
    kwargs = {"attention_mask": torch.ones(batch_size, SEQ_LEN, dtype=torch.long),
              "labels": torch.randint(0, 3, (batch_size,))}
    return model, (input_ids,), kwargs
