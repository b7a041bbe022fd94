"""torchvision resnet18, random weights, in training mode: clean under DataParallel.

64x64 images keep layer4's output at 2x2, so BatchNorm in training mode still has more
than one value per channel on a one-sample replica chunk.
"""

import torch
import torchvision


def dpcheck_example(batch_size=4):
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    return model, (torch.randn(batch_size, 3, 64, 64),)
