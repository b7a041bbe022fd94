"""Which classes place themselves on a device when they are built.

A training module that holds its networks and moves them in `__init__` (`self.netG.to(
self.device_ids[0])`, `self.to(device)`, `self.cuda()`) is on a GPU once it is constructed, so a
script that wraps it without moving it is fine. Each file records its classes that do
(``FileResult.self_placing``), and the project index answers ``unplaced:<class>``: no scanned class
of that name moves itself or its submodules in its constructor.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.classes import ClassInfo
from dpcheck.analysis.context import FileContext
from dpcheck.analysis.torch_api import MOVE_METHODS

UNPLACED = "unplaced"  # the condition's kind: `unplaced:<dotted class name>`


def places_itself(info: ClassInfo, ctx: FileContext) -> bool:
    """Does the class's `__init__` move the module or one of its submodules to a device
    (`self.to(device)`, `self.cuda()`, `self.netG.to(self.device_ids[0])`)?"""
    init = info.methods.get("__init__")
    if init is None:
        return False
    for node in ctx.tree_index.nodes_within(init, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in MOVE_METHODS:
            owner = node.func.value
            if isinstance(owner, ast.Attribute):
                owner = owner.value
            if isinstance(owner, ast.Name) and owner.id == "self":
                return True
    return False


def summarize_placement(ctx: FileContext, result) -> None:
    """Fill ``result.self_placing`` (qualified class names) for the project index; only files that
    call `.cuda(` or `.to(` somewhere read the constructors."""
    text = ctx.source.text
    if ".cuda(" not in text and ".to(" not in text:
        return
    result.self_placing = sorted(info.qualname for info in ctx.classes.values() if places_itself(info, ctx))
