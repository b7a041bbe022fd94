"""Recognise device expressions: which pin a GPU index, and which follow the replica.

Under DataParallel each replica thread runs with its own GPU as the *current* device,
so `"cuda"`, `torch.device("cuda")`, a bare `.cuda()` and `x.device` all follow the
replica. Only an explicit index (`"cuda:0"`, `torch.device("cuda", 1)`, `.cuda(0)`,
`.to(0)`) or a device read off the original module's parameters pins one GPU.
"""

from __future__ import annotations

import ast
import re

_INDEXED = re.compile(r"^cuda:\d+$")


def pinned_device(node: ast.AST, resolve) -> str | None:
    """Source text of a device expression that names a fixed CUDA index, else None.

    A conditional expression pins when its GPU branch does: `"cuda:0" if cuda else "cpu"`
    is cuda:0 wherever a GPU (and so DataParallel) is present.
    """
    if isinstance(node, ast.IfExp):
        if pinned_device(node.body, resolve) or pinned_device(node.orelse, resolve):
            return ast.unparse(node)
        return None
    if isinstance(node, ast.Call) and resolve(node.func) == "torch.device" and node.args \
            and isinstance(node.args[0], ast.IfExp) and pinned_device(node.args[0], resolve):
        return ast.unparse(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _INDEXED.match(node.value):
        return repr(node.value)
    if isinstance(node, ast.Call) and resolve(node.func) == "torch.device":
        args = list(node.args)
        index = next((k.value for k in node.keywords if k.arg == "index"), None)
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            if _INDEXED.match(args[0].value):
                return ast.unparse(node)
            if args[0].value == "cuda" and (len(args) > 1 or index is not None):
                return ast.unparse(node)
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, int) \
                and not isinstance(args[0].value, bool):
            return ast.unparse(node)
    return None


def is_int_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) \
        and not isinstance(node.value, bool)


def parameter_device(node: ast.AST, is_self) -> bool:
    """`next(self.parameters()).device`, `self.weight.device`-style reads off the module."""
    if not (isinstance(node, ast.Attribute) and node.attr == "device"):
        return False
    inner = node.value
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "next" \
            and inner.args and isinstance(inner.args[0], ast.Call):
        call = inner.args[0]
        return isinstance(call.func, ast.Attribute) and call.func.attr in (
            "parameters", "buffers", "named_parameters") and _rooted_at(call.func.value, is_self)
    return False


def _rooted_at(node: ast.AST, is_self) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return is_self(node)


def placement_arguments(call: ast.Call) -> list[ast.AST]:
    """The arguments of ``call`` that choose a device: `device=`, `.to(d)`, `.cuda(d)`."""
    found = [k.value for k in call.keywords if k.arg == "device"]
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda") and call.args:
        found.append(call.args[0])
    return found
