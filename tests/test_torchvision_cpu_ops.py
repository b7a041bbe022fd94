"""The stand-in for torchvision's compiled `nms` (tests/support/torchvision_cpu_ops), which lets
the real-model suite run torchvision's detection models beside a CPU-only torch: it must keep
exactly the boxes greedy non-maximum suppression keeps. Where torchvision's compiled operators
load, the same test checks torchvision's own kernel against the same reference."""

from __future__ import annotations

import pytest
from test_real_models import unimportable

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ops():
    reason = unimportable("torchvision")
    if reason:
        pytest.skip(reason)
    import torchvision.ops

    return torchvision.ops


def greedy_nms(boxes, scores, iou_threshold, box_iou):
    kept = []
    for i in scores.argsort(descending=True, stable=True).tolist():
        if all(box_iou(boxes[i:i + 1], boxes[j:j + 1]).item() <= iou_threshold for j in kept):
            kept.append(i)
    return kept


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("iou_threshold", [0.3, 0.7])
def test_nms_keeps_what_greedy_suppression_keeps(ops, seed, iou_threshold):
    generator = torch.Generator().manual_seed(seed)
    boxes = torch.rand(120, 4, generator=generator) * 10
    boxes[:, 2:] += boxes[:, :2] + 0.1
    scores = torch.rand(120, generator=generator)
    kept = ops.nms(boxes, scores, iou_threshold)
    assert kept.dtype == torch.long
    assert kept.tolist() == greedy_nms(boxes, scores, iou_threshold, ops.box_iou)


def test_nms_of_no_boxes(ops):
    assert ops.nms(torch.empty(0, 4), torch.empty(0), 0.5).tolist() == []


def test_batched_nms_suppresses_within_each_class_only(ops):
    boxes = torch.tensor([[0.0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    classes = torch.tensor([0, 0, 1])
    assert ops.batched_nms(boxes, scores, classes, 0.5).tolist() == [0, 2]
