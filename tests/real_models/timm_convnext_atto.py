"""timm convnext_atto, random weights, 64x64 images (2x2 after the 32x downsampling): clean."""

import timm
import torch


def dpcheck_example(batch_size=4):
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=10)
    return model, (torch.randn(batch_size, 3, 64, 64),)
