"""timm vit_tiny_patch16_224 at img_size=32 (a 2x2 patch grid), random weights: clean."""

import timm
import torch


def dpcheck_example(batch_size=4):
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, num_classes=10)
    return model, (torch.randn(batch_size, 3, 32, 32),)
