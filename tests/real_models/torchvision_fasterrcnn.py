"""torchvision Faster R-CNN (MobileNetV3-Large FPN), random weights, training mode with targets.

Called as torchvision documents it, `model(images, targets)`: a list of (3, H, W) images
and a list of {"boxes", "labels"} dicts, one per image; in training mode it returns a dict
of four 0-dim losses. DataParallel scatters a list by scattering each element along its
own dim 0, so every replica gets all the images cut along their channels.
"""

import torch
import torchvision


def dpcheck_example(batch_size=4):
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None, num_classes=3, min_size=64, max_size=64)
    generator = torch.Generator().manual_seed(batch_size)
    images = [torch.rand(3, 64, 64, generator=generator) for _ in range(batch_size)]
    targets = []
    for _ in range(batch_size):
        corner = torch.rand(2, 2, generator=generator) * 24
        size = 16 + torch.rand(2, 2, generator=generator) * 16
        boxes = torch.cat([corner, corner + size], dim=1)  # (2, 4): x1 y1 x2 y2 inside the 64x64 image
        targets.append({"boxes": boxes, "labels": torch.randint(1, 3, (2,), generator=generator)})
    return model, (images, targets)
