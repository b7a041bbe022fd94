"""
## What it does
Flags a call of an `nn.DataParallel` wrapper in a training script that passes a Python
list of per-sample values: `x.tolist()`, a list comprehension over the batch that does not
build tensors, `[len(s) for s in batch]`, `list(...)`, a list literal of numbers or
strings, directly or through a local name, or as an element of a list, tuple or dict
literal (`model([images.cuda(), lengths.tolist()])`).

The model's side of the same hazard: a wrapped model whose forward (or a method it hands the
argument to) walks an argument as one string per sample, paired with the samples by position
(`for i, box in enumerate(bbox): if box != '': ... p2[i]`, or `zip(tags, h)` beside a batch
tensor, the items compared with a string or opened as paths). Only a Python list of strings can be
that argument. Behind a constructor option off as the class is built it is a warning; so is an
argument that defaults to None, unless a scanned call through a DataParallel wrapper of the class
passes it.

## Why is this bad?
DataParallel's scatter walks lists, tuples and dicts and splits every tensor it finds in
them along dim 0; any other value (a number, a string, a list of numbers) is handed whole
to every replica. A list of B Python numbers is therefore paired, on each replica, with a
B/N chunk of the tensors: `pack_padded_sequence` raises `Expected len(lengths) to be equal
to batch_size`, or the replica silently uses the lengths or labels of other samples. A list whose
items the script does not show (`list(images)`, `[crop(im) for im in images]`) may hold tensors
instead: scatter then splits each item along its own dim 0, so every replica gets all B items, each
cut to a slice of its first dim (a per-sample image loses channels), and the message says both.

A container of tensors is not flagged: `model([images.cuda().float(), batch['annot']])`
reaches each replica as a list of the two tensors' chunks, which is what such a model
expects. Neither is a scalar or `None` inside a container (every replica gets the same
value, as intended), nor a comprehension that builds tensors. Whether each tensor's dim 0
is the batch cannot be seen statically: `dpcheck --confirm` checks that (DP803, DP805).

## How to fix
Pass per-sample values as a tensor with a batch dimension (`torch.tensor(lengths)`), so
that it is split together with the batch; convert it back inside forward if needed.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.dataflow import (
    OPTION_PATH_NOTE,
    batch_derived,
    option_constructions,
    parameters_of,
)
from dpcheck.analysis.guards import wrapper_passes_condition
from dpcheck.analysis.outputs import gathered_class
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.analysis.torch_api import FUNCTION_DEFS, TENSOR_METHODS
from dpcheck.findings import Severity
from dpcheck.rule import Rule

# Builtins whose result is a Python scalar: a list of them is not split by scatter.
_SCALAR_BUILTINS = frozenset({"int", "float", "len", "str", "bool", "round", "abs", "ord", "repr"})
# Methods whose result is a Python scalar.
_SCALAR_METHODS = frozenset({"item", "size", "numel", "dim", "lower", "upper", "strip", "split", "format"})
# Calls that read a file whose path is their first argument: an item handed to one is a path.
_PATH_READERS = frozenset({"open", "PIL.Image.open", "cv2.imread", "numpy.load", "numpy.loadtxt", "numpy.genfromtxt",
                           "imageio.imread", "os.path.exists", "os.path.isfile", "json.load"})
# torch.* names that are not tensor-producing functions.
_NOT_TENSOR_PREFIXES = ("torch.cuda.", "torch.device", "torch.Size", "torch.nn.", "torch.utils.",
                        "torch.distributed.", "torch.backends.")


class PythonListArgument(Rule):
    code = "DP504"
    name = "python-list-argument"
    severity = Severity.ERROR
    wrapper_method = "scatter"
    forward_code_only = True
    summary = "A Python list passed to a DataParallel model reaches every replica whole"
    fix_hint = "Pass per-sample values as a tensor with a batch dimension (torch.tensor(lengths))"
    bad_example = """
        model = nn.DataParallel(Tagger().cuda())
        for padded, lengths in loader:
            scores = model(padded.cuda(), lengths.tolist())
    """
    good_example = """
        model = nn.DataParallel(Tagger().cuda())
        for padded, lengths in loader:
            scores = model(padded.cuda(), lengths)
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in ctx.nodes(ast.Call):
            if facts.called_wrap(call) is None:
                continue
            lists = _ListFinder(call, ctx)
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                found = lists.find(arg)
                if found is None:
                    continue
                node, why = found
                where = "" if node is arg else " inside a container"
                if lists.items_known:
                    what = ("scatter splits only the tensors in lists, tuples and dicts and hands other values "
                            "whole to every replica, so each replica gets all B entries with its B/N chunk of the "
                            "batch")
                else:
                    # Items this file does not show: scatter splits a list of tensors item by item.
                    what = ("scatter hands a list of Python values whole to every replica, so each replica gets "
                            "all B entries with its B/N chunk of the batch; if the items are tensors, it splits "
                            "each along its own dim 0 instead, so each replica gets all B items, each cut to a "
                            "slice of its first dim (one tensor per sample is cut across its channels or steps, "
                            "not shared out by sample)")
                yield self.violation(node, f"{why}{where} passed to the DataParallel model: {what}")


    def check_class(self, model):
        # The model's side of the same hazard: forward (or a helper it hands the argument to) walks an
        # argument as one string per sample, paired by position with the chunk's samples: only a
        # Python list of strings can be that argument, and scatter hands it whole to every replica.
        if model.forward is None or not gathered_class(model):
            return
        for fn, loop, param, use in _per_sample_string_loops(model):
            message = (f"forward's argument `{param}` is walked as one string per sample ({use}, paired with the "
                       "samples by position): a Python list of strings, which scatter hands whole to every "
                       "replica, so each replica pairs the first B/N of all B entries with its own B/N samples")
            if (settled := option_constructions(model, fn, loop)) is not None:
                yield self.violation(loop.iter, message + OPTION_PATH_NOTE, severity=Severity.WARNING, **settled)
            elif (passed := wrapper_passes_condition(model, param)) is not None:
                # An optional argument (`bbox=None`): a hazard where a call through the wrapper passes it.
                yield self.violation(loop.iter, message, severity=Severity.WARNING, error_if=passed)
            else:
                yield self.violation(loop.iter, message)


def _per_sample_string_loops(model):
    """(function, loop, forward's parameter, how an item is used) for each loop of the code forward runs
    over an argument of forward, `for i, box in enumerate(bbox):` (or `zip(bbox, ...)`), whose items
    are strings (compared with a string constant, or opened as a path: `if box != '':`, `open(box)`) and
    that pairs them with the samples by position (the enumerate index subscripts a batch tensor, or
    the zip walks one beside it)."""
    for fn in model.in_forward:
        loops = list(fn.nodes(ast.For))
        params = _forward_arguments(model, fn) if loops else None
        if not params:
            continue
        derived = batch_derived(fn)
        for loop in loops:
            walked = _walked_argument(loop, params, derived)
            if walked is None:
                continue
            param, item, index = walked
            use = _string_use(loop, item, model.ctx)
            if use is not None and (index is None or _subscripts_with(loop, index, derived, param)):
                yield fn, loop, param, use


def _forward_arguments(model, fn) -> set[str]:
    """The parameters of ``fn`` that hold forward's arguments: forward's own, or for a method of the
    class those that every call of it in the code forward runs passes a parameter of forward to
    (`self._forward_impl_bbox(x, bbox)`)."""
    forward = model.forward
    if fn is forward:
        return set(parameters_of(fn))
    if fn.owner is None or fn.node.args.vararg or fn.node.args.kwarg:
        return set()
    inputs = set(parameters_of(forward))
    positional = [a.arg for a in (*fn.node.args.posonlyargs, *fn.node.args.args)][1:]
    found: dict[str, bool] = {}
    for caller in model.in_forward:
        for call in caller.nodes(ast.Call):
            if caller.self_attr(call.func) != fn.name:
                continue
            passed = {name: call.args[i] for i, name in enumerate(positional) if i < len(call.args)}
            passed.update((k.arg, k.value) for k in call.keywords if k.arg)
            for name in positional:
                value = passed.get(name)
                found[name] = found.get(name, True) and caller is forward and isinstance(value, ast.Name) \
                    and value.id in inputs
    return {name for name, always in found.items() if always}


def _walked_argument(loop: ast.For, params: set[str], derived) -> tuple[str, str, str | None] | None:
    """(the argument, the item's name, the enumerate index's name or None for a zip beside a batch
    tensor) of `for i, box in enumerate(bbox):` / `for box, feat in zip(bbox, feats):`, or None."""
    it, target = loop.iter, loop.target
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.args and not it.keywords
            and isinstance(target, ast.Tuple) and len(target.elts) == len(it.args) + (it.func.id == "enumerate")):
        return None
    if it.func.id == "enumerate" and len(it.args) == 1 and isinstance(it.args[0], ast.Name) \
            and it.args[0].id in params and all(isinstance(e, ast.Name) for e in target.elts):
        return it.args[0].id, target.elts[1].id, target.elts[0].id
    if it.func.id == "zip" and len(it.args) > 1:
        for position, arg in enumerate(it.args):
            item = target.elts[position]
            others = [a for a in it.args if a is not arg]
            if isinstance(arg, ast.Name) and arg.id in params and isinstance(item, ast.Name) \
                    and any(isinstance(o, ast.Name) and derived.get(o.id) and o.id not in params for o in others):
                return arg.id, item.id, None
    return None


def _string_use(loop: ast.For, item: str, ctx) -> str | None:
    """How the loop's body uses ``item`` as a string: `box != ''`, `open(box)`; else None."""
    for node in ast.walk(loop):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            sides = (node.left, node.comparators[0])
            if any(isinstance(a, ast.Name) and a.id == item for a in sides) \
                    and any(isinstance(b, ast.Constant) and isinstance(b.value, str) for b in sides):
                return f"`{ast.unparse(node)}`"
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) \
                and node.args[0].id == item and _reads_path(node.func, ctx):
            return f"`{ast.unparse(node.func)}({item}, ...)`"
    return None


def _reads_path(func: ast.AST, ctx) -> bool:
    """Is ``func`` one of ``_PATH_READERS`` (the builtin `open` where the file does not bind the name)?"""
    if isinstance(func, ast.Name) and func.id == "open":
        return func.id not in ctx.imports.aliases and func.id not in ctx.module_functions
    return (ctx.resolve(func) or "") in _PATH_READERS


def _subscripts_with(loop: ast.For, index: str, derived, param: str) -> bool:
    """Does the loop's body read sample ``index`` of a batch tensor (`p2[i]`), not of the argument?"""
    for node in ast.walk(loop):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id != param \
                and derived.get(node.value.id):
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
            if isinstance(first, ast.Name) and first.id == index:
                return True
    return False


def _empty_list(node: ast.AST) -> bool:
    return isinstance(node, ast.List) and not node.elts


class _ListFinder:
    """Finds, in one argument of a wrapper call, a Python list of per-sample values."""

    def __init__(self, call, ctx):
        self.call, self.ctx = call, ctx
        # Whether the last list found visibly holds Python values (`.tolist()`, `[int(n) for n in ...]`, a
        # literal of numbers) rather than items this file does not show (`list(views)`, `[f(v) for v in ...]`).
        self.items_known = True

    def find(self, node, depth=0) -> tuple[ast.AST, str] | None:
        """(the node to report, why) for the argument itself or one of its container elements."""
        why = self._python_list(node, depth)
        if why:
            return node, why
        if isinstance(node, (ast.List, ast.Tuple)):
            elements = node.elts
        elif isinstance(node, ast.Dict):
            elements = node.values
        else:
            return None
        for element in elements:
            if isinstance(element, ast.Starred):
                continue
            found = self.find(element, depth)
            if found is not None:
                return found
        return None

    def _python_list(self, node, depth) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "tolist" \
                and not node.args:
            self.items_known = True
            return f"`{ast.unparse(node)}` (a Python list)"
        if isinstance(node, ast.ListComp) and not self._tensor(node.elt):
            self.items_known = self._scalar(node.elt)
            return "a list comprehension"
        if isinstance(node, ast.List) and node.elts and all(self._scalar(e) for e in node.elts):
            self.items_known = True
            return "a list literal of Python values"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list":
            self.items_known = False
            return "`list(...)`"
        if isinstance(node, ast.Name) and depth < 2:
            value = self._binding(node)
            if value is not None:
                found = self.find(value, depth + 1)
                if found is not None:
                    inner, why = found
                    if inner is value:
                        return f"`{node.id}`, {why},"
                    return f"`{node.id}`, which holds {why.rstrip(',')},"
            if (value is None or _empty_list(value)) and self._appended_python_values(node.id):
                return f"`{node.id}`, a list filled with Python values by `.append`,"
        return None

    def _appended_python_values(self, name: str) -> bool:
        """Is ``name`` a list of Python values built in the call's function: every binding of it there
        is a list literal of them (`cxts = []`, also again after each batch, so that no one binding
        reaches the call), and the function only appends or inserts Python values into it
        (`cxts.append(ss[0].strip())`), at least once?"""
        scope = self.ctx.enclosing(self.call, FUNCTION_DEFS)
        if scope is None or name in {a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}:
            return False
        appended = False
        for node in ast.walk(scope):
            if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
                value = self._assigned(node)
                if not (isinstance(value, ast.List) and all(self._scalar(e) for e in value.elts)):
                    return False  # (a loop target, an unpacking, `+=`, `del`, a `with ... as`)
            elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
                return False
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
                call = self.ctx.parent(node)
                if node.attr in ("append", "insert", "extend", "__setitem__", "__iadd__"):
                    if not (node.attr in ("append", "insert") and isinstance(call, ast.Call) and call.func is node
                            and call.args and self._scalar(call.args[-1])):
                        return False
                    appended = True
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name \
                    and not isinstance(node.ctx, ast.Load):
                return False  # (`cxts[i] = tensor`)
        return appended

    def _assigned(self, target: ast.Name) -> ast.AST | None:
        """The value a plain assignment binds to ``target``: `x = value`, or `a, x = [], []`."""
        parent = self.ctx.parent(target)
        if isinstance(parent, ast.Assign) and target in parent.targets:
            return parent.value
        holder = self.ctx.parent(parent) if isinstance(parent, ast.Tuple) else None
        if isinstance(holder, ast.Assign) and parent in holder.targets and isinstance(holder.value, ast.Tuple) \
                and len(holder.value.elts) == len(parent.elts):
            return holder.value.elts[parent.elts.index(target)]
        return None

    def _tensor(self, node) -> bool:
        """Is ``node`` visibly a tensor: a torch call, or a tensor method on anything?"""
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS:
                return True
            resolved = self.ctx.resolve(func) or ""
            return resolved.startswith("torch.") and not resolved.startswith(_NOT_TENSOR_PREFIXES)
        return False

    @staticmethod
    def _scalar(node) -> bool:
        """Is ``node`` visibly a Python number or string?"""
        if isinstance(node, ast.Constant):
            return node.value is not None
        if isinstance(node, ast.UnaryOp):
            return _ListFinder._scalar(node.operand)
        if isinstance(node, ast.JoinedStr):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                return func.id in _SCALAR_BUILTINS
            return isinstance(func, ast.Attribute) and func.attr in _SCALAR_METHODS
        return False

    def _binding(self, name):
        """The value of the assignment of ``name`` that reaches the call (in the call's own scope)."""
        binding = reaching_assignment(self.ctx, name.id, self.call)
        return binding.value if binding is not None else None
