"""Inputs for the held-out models, kept outside the model files (the `examples` setting)."""
import torch


def dpcheck_example_DualEncoder(batch_size):
    from clip_like import DualEncoder
    return DualEncoder(), (torch.randn(batch_size, 3, 8, 8), torch.randint(0, 100, (batch_size, 5)))


def dpcheck_example_Queue(batch_size):
    from moco_like import Queue
    return Queue(), (torch.randn(batch_size, 8), torch.randn(batch_size, 8))
