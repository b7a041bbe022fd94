"""torchvision mobilenet_v3_small, random weights, in training mode: clean under DataParallel."""

import torch
import torchvision


def dpcheck_example(batch_size=4):
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10)
    return model, (torch.randn(batch_size, 3, 64, 64),)
