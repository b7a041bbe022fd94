"""Lets torchvision's models run beside a CPU-only torch whose torchvision has no compiled ops.

Put this folder on PYTHONPATH (tests/test_real_models.py does, for the `dpcheck --confirm`
children it starts). Why: the package index has only CUDA builds of torchvision; their compiled
operators (`torchvision/_C.so`) need torch's CUDA libraries and do not load beside the CPU torch
CI installs, and `import torchvision` then fails registering a fake kernel for
`torchvision::nms`, an operator that does not exist. torchvision's own Python code copes with
missing compiled ops everywhere except there and in `nms`, which every detection model calls
(`roi_align` falls back to its pure-PyTorch `_roi_align`). So, only when the compiled ops did not
load, this defines `torchvision::nms` (and `qnms`, whose fake kernel is registered beside it)
with a CPU kernel written in PyTorch, and lets `torchvision.ops.boxes` call it. Where the
compiled ops load (a CUDA torch, the GPU machines) it changes nothing.

It imports nothing at interpreter start: a finder on sys.meta_path acts when torchvision's
modules are imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

_BEFORE = "torchvision._meta_registrations"  # registers the fake nms kernel: the op must exist first
_AFTER = "torchvision.ops.boxes"  # `nms` asserts the compiled ops loaded; here they are defined
_standing_in = False  # whether this process defined the stand-in ops


def _nms(boxes, scores, iou_threshold: float):
    """Greedy non-maximum suppression, as torchvision's CPU kernel: indices of the kept boxes,
    by decreasing score."""
    import torch

    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=boxes.device)
    order = scores.argsort(descending=True, stable=True)
    ordered = boxes[order]
    x1, y1, x2, y2 = ordered.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    width = (torch.minimum(x2[:, None], x2[None, :]) - torch.maximum(x1[:, None], x1[None, :])).clamp(min=0)
    height = (torch.minimum(y2[:, None], y2[None, :]) - torch.maximum(y1[:, None], y1[None, :])).clamp(min=0)
    overlap = width * height
    overlaps = (overlap / (areas[:, None] + areas[None, :] - overlap) > iou_threshold).tolist()
    suppressed = [False] * len(overlaps)
    kept = []
    for i, row in enumerate(overlaps):
        if suppressed[i]:
            continue
        kept.append(i)
        suppressed = [s or o for s, o in zip(suppressed, row)]
    return order[torch.tensor(kept, dtype=torch.long, device=boxes.device)]


def _define_missing_ops() -> None:
    global _standing_in
    import torch
    import torchvision.extension

    if torchvision.extension._has_ops():
        return
    library = torch.library.Library("torchvision", "DEF")
    library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.impl("nms", _nms, "CPU")
    _LIBRARIES.append(library)  # a Library deregisters its ops when collected
    _standing_in = True


def _allow_nms(module) -> None:
    if _standing_in:
        module._assert_has_ops = lambda: None


_LIBRARIES: list = []


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, after):
        self._loader, self._after = loader, after

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._after(module)


class _TorchvisionOps(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == _BEFORE:
            _define_missing_ops()
            return None
        if name != _AFTER:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, _allow_nms)
        return spec


sys.meta_path.insert(0, _TorchvisionOps())
