"""
## What it does
Flags a sample-against-sample matrix returned from a model's `forward`, alone or inside a
tuple, dict or output record: `image_embeds @ text_embeds.T` (CLIP-style logits),
`torch.mm(a, b.t())`, `torch.cdist(a, b)`, `a.unsqueeze(1) - b.unsqueeze(0)`, with both
operands computed from the batch, followed through local names, scaling and `.t()`.

## Why is this bad?
Each DataParallel replica compares only its own B/N samples and returns a (B/N, B/N)
block; gather concatenates the blocks along dim 0 into a (B, B/N) matrix. Code after the
call that expects (B, B) (a contrastive loss with `arange(B)` targets, retrieval metrics)
gets the wrong shape: `cross_entropy` raises `Target N out of bounds`, or indexes the
wrong columns, and when the batch does not divide evenly the blocks have different widths
and gather fails with `Sizes of tensors must match except in dimension 0`.

## How to fix
Return the embeddings (batch-major) and compute the similarity matrix after the
DataParallel call, on the gathered batch.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import is_batch_tensor, pairwise_over_batch
from dpcheck.analysis.outputs import gathered_class, optional_severity, returned_leaves
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule

# Elementwise steps that keep a (B, B) matrix (B, B): scaling, dtype, transposes, activations.
_KEEPS_SHAPE = frozenset({"t", "T", "mT", "float", "half", "to", "exp", "contiguous", "clone", "detach",
                          "sigmoid", "softmax", "log_softmax", "clamp", "mul", "div", "type_as"})


class BatchByBatchOutput(Rule):
    code = "DP408"
    name = "batch-by-batch-output"
    severity = Severity.ERROR
    wrapper_method = "gather"
    forward_code_only = True
    confirms = frozenset({K.OUTPUT_SHAPE_DIFFERS, K.GATHER_FAILED})
    summary = "A (B, B) similarity matrix returned from forward is gathered as (B, B/N) blocks"
    fix_hint = "Return the embeddings and compute the similarity matrix after the DataParallel call"
    bad_example = """
        class DualEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.image = nn.Linear(8, 4)
                self.text = nn.Linear(8, 4)

            def forward(self, images, texts):
                image_embeds = self.image(images)
                text_embeds = self.text(texts)
                logits_per_image = image_embeds @ text_embeds.t()
                return logits_per_image, logits_per_image.t()
    """
    good_example = """
        class DualEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.image = nn.Linear(8, 4)
                self.text = nn.Linear(8, 4)

            def forward(self, images, texts):
                return self.image(images), self.text(texts)
    """

    def check_class(self, model):
        if not gathered_class(model):
            return
        resolve = model.ctx.resolve
        reported: set[int] = set()
        for leaf, fn, anchor in returned_leaves(model):
            if id(anchor) not in reported and _batch_by_batch(leaf, fn, resolve, 0):
                reported.add(id(anchor))
                yield self.violation(anchor, "forward returns a sample-by-sample matrix: each DataParallel "
                                     "replica returns a (B/N, B/N) block and gather stacks them into "
                                     "(B, B/N), a gather error when the batch does not divide evenly",
                                     severity=optional_severity(anchor, model, leaf))


def _batch_by_batch(node, fn, resolve, depth) -> bool:
    if depth > 6:
        return False
    if pairwise_over_batch(node, fn, resolve):
        return True
    if isinstance(node, ast.Name):
        return any(_batch_by_batch(v, fn, resolve, depth + 1) for v in fn.local_values.get(node.id, ()))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div, ast.Add, ast.Sub)):
        # `logits * scale`: the matrix side decides; a batch tensor on the other side would broadcast
        sides = (node.left, node.right)
        for side, other in (sides, sides[::-1]):
            if _batch_by_batch(side, fn, resolve, depth + 1) and not is_batch_tensor(other, fn):
                return True
        return False
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        return _batch_by_batch(node.value, fn, resolve, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEEPS_SHAPE:
        return _batch_by_batch(node.func.value, fn, resolve, depth + 1)
    return False

