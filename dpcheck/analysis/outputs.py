"""What a module's forward returns, seen through local names and containers.

DataParallel gathers the value forward returns: tensors are concatenated on dim 0,
tuples, lists and dicts are walked, everything else breaks. The output rules ask
"which leaves of the returned structure are X?"; this module answers with the leaf
expressions, following local variables, locally built dicts/lists, output records
(`ModelOutput(loss=...)`), and ``return self._forward_impl(x)`` into the helper (element k of
its tuple for `a, b = self.helper(x)`); a leaf is 0-dim also through this file's module-level
functions that return one (`loss = weighted_l1_loss(pred, target)`). Which class is gathered (``gathered_class``) and whether
a return sits behind a non-default option (``optional_severity``: warning) are decided here too.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator

from dpcheck.analysis.classes import WRAPPED_CONDITION
from dpcheck.analysis.context import FileContext
from dpcheck.analysis.dataflow import parameter_defaults, parameters_of
from dpcheck.analysis.model_class import ITEM, ModelClass
from dpcheck.analysis.names import dotted, part_class
from dpcheck.analysis.torch_api import FUNCTION_DEFS, PARAMETER_FREE, FunctionNode
from dpcheck.analysis.tree import FunctionInfo
from dpcheck.findings import Severity

_MAX_DEPTH = 6


def gathered_class(model: ModelClass, cross_file: bool = True) -> bool:
    """Could this class's forward output be what DataParallel gathers?

    Classes built as a layer of another module of this file are not wrapped themselves (unless
    a script of this file wraps them): their outputs are consumed inside a parent's forward.
    Loss modules (named *Loss, *CrossEntropy, *CE, *Criterion, *Metric, owning no layers) are gathered
    only on condition that some scanned file wraps them (`nn.DataParallel(LossWrapper(model,
    opt))`, which runs the model and its loss on each replica); a criterion is otherwise applied
    to the gathered output or inside a parent's forward. A wrapper named for both
    (`ModelAndLoss`, `NetWithLoss`) is a model. A class that is top-level in its file is
    gathered on condition that no other scanned file uses it as a layer, or that one wraps it.
    With ``cross_file`` the condition is recorded on the model and attached to the findings the
    calling rule yields for it; without, a class gathered only where a file wraps it is not.
    """
    gathered, condition = gathered_verdict(model)
    if condition is None:
        return gathered
    if cross_file:
        model.conditions.add(condition)
        return True
    return not condition.startswith(WRAPPED_CONDITION)


def gathered_verdict(model: ModelClass) -> tuple[bool, str | None]:
    """(could its output be gathered, the cross-file condition on which it is, if any): what
    ``gathered_class`` decides, for a rule that attaches the condition to some findings only."""
    # Every output rule asks this of every class: decided once per class (the file's facts do
    # not change), while the cross-file condition is recorded again for each asking rule.
    verdict = model.__dict__.get("_gathered_verdict")
    if verdict is None:
        verdict = model._gathered_verdict = _gathered_verdict(model)
    return verdict


def _gathered_verdict(model: ModelClass) -> tuple[bool, str | None]:
    """(could its output be gathered, the cross-file condition on which it is, if any)."""
    from dpcheck.analysis.wrapping import SUBMODULE, WRAPPED, harness_condition, wrap_evidence

    evidence = wrap_evidence(model)
    if evidence == WRAPPED:
        return True, None
    if harness_condition(model):
        # A harness that parallelises its own model: gathered only where a scanned file wraps the
        # harness too, the condition every class rule's findings in it carry (see dpcheck.analysis.file).
        return True, None
    if is_loss_module(model):
        # a loss module; a model that owns layers and a loss is checked as any model is
        return True, f"{WRAPPED_CONDITION}{model.info.qualname}"
    if evidence == SUBMODULE:
        return False, None
    return True, f"gathered:{model.info.qualname}"


def is_loss_module(model: ModelClass) -> bool:
    """A loss module: named *Loss, *CrossEntropy, *CE, *Criterion, *Metric (`FocalLoss`, `SetCriterion`),
    or derived from a class so named (`Accuracy(base.Metric)`), owning no layers, and not named for a
    model that holds its loss (`ModelAndLoss`, `NetWithLoss`)."""
    # The cross-batch, squeeze and output rules each ask it of every class: decided once per class.
    verdict = model.__dict__.get("_loss_module_verdict")
    if verdict is None:
        verdict = model._loss_module_verdict = (
            _named_as_loss(model.name) or any(_named_as_loss(base.rsplit(".", 1)[-1]) for base in model.info.bases)) \
            and not _owns_layers(model)
    return verdict


def _named_as_loss(name: str) -> bool:
    """Is this the name of a loss, not of a model holding one? In `<A>With<B>` the thing is `<A>`: a
    loss with an option where `<A>` names a loss (`CrossEntropyLossWithOHEM`, `SoftBCEWithLogitsLoss`,
    `BCEBlurWithLogitsLoss`), a model holding its loss where it does not (`ClassifierWithLoss`)."""
    if not _LOSS_CLASS.search(name) or "Model" in name or "Net" in name:
        return False
    head, with_, _ = name.partition("With")
    return not with_ or bool(_LOSS_CLASS.search(head) or _LOSS_INITIALS.search(head))


# `FocalLoss`, `AsymmetricLossMultiLabel`, `SetCriterion`, `Yolo_loss` (not `Lossless`), and a name
# ending in cross-entropy's initials (`ConfidenceBasedCE`, `LabelSmoothingCE`, `WeightedBCE`; only
# at the end, where a block's acronym such as `CEModule` does not reach).
_LOSS_CLASS = re.compile(r"(Loss|CrossEntropy|Criterion|Metric)([A-Z0-9_]|$)|(^|_)loss(_|$)|[a-z_]B?CE$")
# Cross-entropy's initials as a word of the part before `With` (`BCEBlur`, `SoftBCE`): that part names
# the class, and a name that reaches `With` also names a loss elsewhere (`_LOSS_CLASS`).
_LOSS_INITIALS = re.compile(r"(^|[a-z_])B?CE([A-Z0-9_]|$)")

def _owns_layers(model: ModelClass) -> bool:
    """Does the class hold a submodule that can have weights (not an activation or a loss)?
    A learned tensor of its own (CenterLoss's `self.centers = nn.Parameter(...)`) makes a criterion
    no model: a script still builds it apart from the wrapped model and trains it with its own
    optimizer on the gathered output, and a model that holds its loss holds layers besides."""
    for facts in model.attrs.values():
        for _, value, _ in facts.assignments:
            if isinstance(value, ast.Call) and model.classify(value, None)[0] == "module":
                name = (model.ctx.resolve(value.func) or "").rsplit(".", 1)[-1]
                if not any(name.endswith(p) or name.startswith(p) for p in PARAMETER_FREE):
                    return True
    return False


def child_classes(ctx: FileContext) -> frozenset[str]:
    """Classes of this file built as a layer of another module of this file (simple names),
    also through a module-level builder; see dpcheck.analysis.wrapping for the cross-file part."""
    return ctx.fact(_find_child_classes)


def _find_child_classes(ctx: FileContext) -> frozenset[str]:
    """Classes of this file constructed inside another class of this file; also classes built by
    a module-level builder (`def build_encoder(): return Enc()`) that a
    class of this file calls."""
    found: set[str] = set()
    built_by: dict[str, set[str]] = {}  # module-level function -> classes it constructs
    called_in_classes: set[str] = set()
    # Only calls of this file's classes and functions can matter: the others (builtins, imported
    # layers, most calls) are skipped before their ancestors are climbed.
    local_names = set(ctx.classes).union(f.name for f in ctx.nodes(*FUNCTION_DEFS))
    for call in ctx.nodes(ast.Call):
        func = part_class(call.func, ctx.classes, ctx.tree)  # (`Decoder._from_config(config)` builds a Decoder)
        if not isinstance(func, ast.Name) or func.id not in local_names:
            continue
        owner = ctx.parent(call)
        function = None
        while owner is not None and not isinstance(owner, ast.ClassDef):
            if isinstance(owner, FUNCTION_DEFS):
                function = owner  # ends as the outermost function
            owner = ctx.parent(owner)
        if owner is not None:
            called_in_classes.add(func.id)
            if func.id in ctx.classes and owner.name != func.id:
                found.add(func.id)
        elif function is not None and func.id in ctx.classes:
            built_by.setdefault(function.name, set()).add(func.id)
    for function, built in built_by.items():
        if function in called_in_classes:
            found |= built
    return frozenset(found)


def returned_leaves(model: ModelClass) -> Iterator[tuple[ast.AST, FunctionInfo, ast.AST]]:
    """(leaf expression, the function it lives in, the node to report) for what forward returns.

    A leaf reached through a local name is reported at the name in the return statement;
    one put into a returned dict or list (`out["loss"] = loss`) at that write.
    """
    # Seven output rules ask this of every gathered class: followed once per class. The leaves
    # depend on the file's facts alone (following them records no cross-file condition), so each
    # rule reads the same sequence. Where following them fails, each rule follows them itself, as
    # if none were remembered: the failure is then each rule's own, at the leaf it reaches.
    known = model.__dict__.get("_returned_leaves")
    if known is None:
        try:
            known = model._returned_leaves = tuple(_returned_leaves(model))
        except Exception:  # noqa: BLE001 - RecursionError, a bug: raised again in each rule that reaches it
            return _returned_leaves(model)
    return iter(known)


def function_leaves(fn: FunctionInfo, plain: "CodeOfNoClass") -> Iterator[tuple[ast.AST, FunctionInfo, ast.AST]]:
    """``returned_leaves`` of a function of no class that runs as the model (functional.parallel_functions)."""
    for value in fn.returns():
        yield from _leaves(value, fn, plain, 0, set(), None)


def _returned_leaves(model: ModelClass) -> Iterator[tuple[ast.AST, FunctionInfo, ast.AST]]:
    forward = model.forward
    if forward is None:
        return
    for value in forward.returns():
        # Each return is its own path: a value returned by two of them is reported at both.
        yield from _leaves(value, forward, model, 0, set(), None)


def _leaves(node, fn, model, depth, seen, anchor):
    if depth > _MAX_DEPTH or id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _leaves(elt.value if isinstance(elt, ast.Starred) else elt, fn, model, depth + 1,
                               seen, anchor)
        return
    if isinstance(node, ast.Dict):
        for value in node.values:
            yield from _leaves(value, fn, model, depth + 1, seen, anchor)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("dict", "tuple", "list"):
        for kw in node.keywords:
            yield from _leaves(kw.value, fn, model, depth + 1, seen, anchor)
        for arg in node.args:
            yield from _leaves(arg, fn, model, depth + 1, seen, anchor)
        return
    if isinstance(node, ast.IfExp):
        yield from _leaves(node.body, fn, model, depth + 1, seen, anchor)
        yield from _leaves(node.orelse, fn, model, depth + 1, seen, anchor)
        return
    if isinstance(node, ast.ListComp):
        # `[at_loss(x, y) for x, y in zip(a, b)]`: gather walks the list; each item is what `elt` makes.
        yield from _leaves(node.elt, fn, model, depth + 1, seen, anchor or node)
        return
    if _tuple_concatenation(node):
        # `outputs = (loss,) + outputs` (the transformers v2 heads and the scripts that copy them):
        # the returned tuple holds both sides. What the display adds is reported where it is added.
        for side in (node.left, node.right):
            if isinstance(side, (ast.Tuple, ast.List)):
                yield from _leaves(side, fn, model, depth + 1, seen, None)
            elif isinstance(side, ast.Name):
                for value in _earlier_values(side.id, node, fn):
                    yield from _leaves(value, fn, model, depth + 1, seen, anchor or side)
            else:
                yield from _leaves(side, fn, model, depth + 1, seen, anchor)
        return
    if isinstance(node, ast.Name):
        values = fn.local_values.get(node.id)
        if values and len(values) > 1:
            # `x = 0` / `loss = None` then reassigned: the initial constant is not what returns.
            values = [v for v in values if not isinstance(v, ast.Constant)] or values
            values = _not_rebuilt(node.id, values, fn)
        if values:
            for value in values:
                yield from _leaves(value, fn, model, depth + 1, seen, anchor or node)
            # Writes into a local container are reported where they happen, unless the container
            # came back from a helper: then at forward's return of the helper's result.
            if any(_is_container(v) for v in values):
                yield from _container_writes(node.id, fn, model, depth, seen, anchor)
            return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        helper = _helper_method(node, fn, model)
        if helper is not None:
            for value in helper.returns():
                yield from _leaves(value, helper, model, depth + 1, seen, anchor or node)
            return
        if _returns_its_arguments(node, fn, model):
            # `self.loss_filter(a, b)`, the filter a closure that returns a list of its arguments:
            # what comes back is the call site's arguments.
            for arg in node.args:
                yield from _leaves(arg.value if isinstance(arg, ast.Starred) else arg, fn, model, depth + 1,
                                   seen, anchor or node)
            return
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, int) and isinstance(node.value, ast.Call):
        # `loss, out = self.compute_loss(...)`: element k of what the helper returns.
        helper = _helper_method(node.value, fn, model)
        if helper is not None:
            for value in helper.returns():
                if isinstance(value, (ast.Tuple, ast.List)):
                    elts = value.elts
                    if -len(elts) <= node.slice.value < len(elts) and not any(
                            isinstance(e, ast.Starred) for e in elts):
                        yield from _leaves(elts[node.slice.value], helper, model, depth + 1, seen,
                                           anchor or node)
                elif not isinstance(value, ast.Constant):
                    yield from _leaves(value, helper, model, depth + 1, seen, anchor or node)
            return
    if isinstance(node, ast.Call) and _output_record(node, model):
        # `ModelOutput(loss=loss, logits=logits)`: gather rebuilds dict-like records field by field.
        for kw in node.keywords:
            if kw.arg is not None:
                yield from _leaves(kw.value, fn, model, depth + 1, seen, anchor)
        for arg in node.args:
            yield from _leaves(arg, fn, model, depth + 1, seen, anchor)
        return
    yield node, fn, anchor or node


def _tuple_concatenation(node: ast.AST) -> bool:
    """`(loss,) + outputs` or `outputs + (loss,)`: a `+` with a tuple or list display on one side."""
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and any(
        isinstance(side, (ast.Tuple, ast.List)) for side in (node.left, node.right))


def added_by_concatenation(anchor: ast.AST, fn: FunctionInfo) -> bool:
    """Is ``anchor`` an element of a tuple or list display that a `+` prepends or appends to the
    returned tuple (`(loss,) + output`)?"""
    display = fn.parent(anchor)
    return isinstance(display, (ast.Tuple, ast.List)) and _tuple_concatenation(fn.parent(display))


def _earlier_values(name: str, concatenation: ast.BinOp, fn: FunctionInfo) -> list[ast.AST]:
    """The values of ``name`` that `name = (x,) + name` (or `name += (x,)`) extends: those bound
    before it, less those a later one of them rebuilds."""
    line = _line(concatenation)
    earlier = [v for v in fn.local_values.get(name, ()) if v is not concatenation and _line(v) < line]
    return _not_rebuilt(name, earlier, fn) if earlier else []


def _line(value: ast.AST) -> int:
    """Where a bound value sits; the bindings tree.local_values builds (`x + y` for `x += y`,
    element k of an unpacked call) sit where their first operand does."""
    for node in (value, getattr(value, "left", None), getattr(value, "value", None)):
        line = getattr(node, "lineno", None)
        if line is not None:
            return line
    return 0


def _helper_method(call: ast.Call, fn: FunctionInfo, model: ModelClass) -> FunctionInfo | None:
    """The method of this class that `self.helper(...)` calls (not forward itself)."""
    attr = fn.self_attr(call.func) if isinstance(call.func, ast.Attribute) else None
    helper = model.find_method(attr) if attr else None
    return helper if helper is not None and helper.name != "forward" else None


def _returns_its_arguments(call: ast.Call, fn: FunctionInfo, model: ModelClass) -> bool:
    """Is `self.attr(...)` a callable that returns a list or tuple of its own arguments?

    pix2pixHD's `self.loss_filter = self.init_loss_filter(...)`: the method returns a nested
    function or lambda whose every return is a list/tuple (or a comprehension over one) built
    only from its parameters and names of the enclosing method (flags, constants).
    """
    closures = _stored_closures(call, fn, model) if call.args and not call.keywords else None
    return bool(closures) and all(_returns_parameters(inner) for inner in closures)


# Attribute kinds (ModelClass.attrs) that hold or are weights: calling or reading one is not a
# plain callable or a configuration number.
_WEIGHTED_KINDS = frozenset({"module", "maybe_module", "parameter", "buffer"})


def _stored_closures(call: ast.Call, fn: FunctionInfo, model: ModelClass) -> list[FunctionInfo] | None:
    """The nested functions or lambdas `self.attr` holds when every assignment of it is
    `self.attr = self.factory(...)` and the factory returns one; None when any is unknown."""
    attr = fn.self_attr(call.func)
    facts = model.attrs.get(attr) if attr is not None else None
    if facts is None or not facts.assignments \
            or facts.kinds & _WEIGHTED_KINDS:
        return None
    closures = []
    for _, value, owner in facts.assignments:
        factory = _helper_method(value, owner, model) if isinstance(value, ast.Call) \
            and isinstance(value.func, ast.Attribute) else None
        if factory is None:
            return None
        for returned in factory.returns():
            inner = returned if isinstance(returned, ast.Lambda) else next(
                (n for n in factory.nodes(ast.FunctionDef) if isinstance(returned, ast.Name) and n.name == returned.id),
                None)
            if inner is None:
                return None
            closures.append(model.function(inner, None))
    return closures or None


def _returns_parameters(inner: FunctionInfo) -> bool:
    args = inner.node.args
    parameters = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    if args.vararg is not None:
        parameters.add(args.vararg.arg)
    returns = list(inner.returns())
    if not returns:
        return False
    for value in returns:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("list", "tuple") \
                and len(value.args) == 1:
            value = value.args[0]
        if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
            source = value.generators[0].iter if len(value.generators) == 1 else None
            # `[l for (l, f) in zip((a, b), flags) if f]`: the items come from the parameters.
            if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "zip" \
                    and source.args:
                source = source.args[0]
            value = source
        if isinstance(value, ast.Name):
            if args.vararg is None or value.id != args.vararg.arg:
                return False  # `return list(losses)` of `*losses` only
            continue
        if not isinstance(value, (ast.List, ast.Tuple)) or not all(
                isinstance(e, ast.Name) and e.id in parameters for e in value.elts):
            return False
    return True


# The names of output records: `CausalLMOutput`, `BaseOutput`, `Seq2SeqLMOutputs`, and the
# transformers records named for what they add (`SequenceClassifierOutputWithPast`,
# `CausalLMOutputWithCrossAttentions`, `ImageClassifierOutputWithNoAttention`).
_OUTPUT_RECORD_NAME = re.compile(r"(?:[A-Z]\w*)?Outputs?(?:With[A-Z]\w*)?")


def output_record_name(name: str) -> bool:
    """Is ``name`` the name of a dict-like output record class (see _OUTPUT_RECORD_NAME)?"""
    return _OUTPUT_RECORD_NAME.fullmatch(name) is not None


def _output_record(call: ast.Call, model: ModelClass) -> bool:
    """A call building a dict-like output record (`CausalLMOutput(...)`, `BaseOutput(...)`).

    Plain dataclasses are left as leaves: gather cannot take them at all.
    """
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if not output_record_name(name):
        return False
    local = model.ctx.classes.get(name)
    return local is None or not _ungatherable_class(model.ctx, local)


def _not_rebuilt(name: str, values: list[ast.AST], fn: FunctionInfo) -> list[ast.AST]:
    """Drop values that a later binding reads and rebuilds (`x = w; x = x.expand(b, -1)`): they
    reach the return only through it."""
    kept = []
    for value in values:
        line = getattr(value, "lineno", None)
        rebuilt = line is not None and any(
            getattr(later, "lineno", 0) > line and any(n.id == name for n in fn.nodes_under(later, ast.Name))
            for later in values)
        if not rebuilt:
            kept.append(value)
    return kept or values


def _is_container(value: ast.AST) -> bool:
    """A dict or list built here (not a tensor written in place with `x[mask] = 0`)."""
    if isinstance(value, (ast.Dict, ast.List, ast.ListComp, ast.DictComp)):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
        and value.func.id in ("dict", "list", "OrderedDict", "defaultdict")


def _container_writes(name, fn, model, depth, seen, anchor):
    """Values put into a local dict/list after creation: `out["loss"] = loss`, `outs.append(y)`,
    `out.update({"loss": loss})` (a dict display, `dict(...)` or keywords: what else it merges in is
    not followed)."""
    for node in fn.nodes(ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and target.value.id == name:
                yield from _leaves(node.value, fn, model, depth + 1, seen, anchor)
    for call in fn.nodes(ast.Call):
        func = call.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == name):
            continue
        if func.attr in ("append", "insert") and call.args:
            yield from _leaves(call.args[-1], fn, model, depth + 1, seen, anchor)
        elif func.attr == "update":
            merged = [a for a in call.args if isinstance(a, ast.Dict) or isinstance(a, ast.Call)
                      and isinstance(a.func, ast.Name) and a.func.id == "dict"]
            for value in merged + [k.value for k in call.keywords if k.arg is not None]:
                yield from _leaves(value, fn, model, depth + 1, seen, anchor)


# --- what a leaf is -----------------------------------------------------------------

_LOSS_FUNCTIONS = frozenset({
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "kl_div", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "ctc_loss",
    "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss", "poisson_nll_loss",
    "gaussian_nll_loss", "hinge_embedding_loss", "multilabel_margin_loss", "soft_margin_loss",
    "multi_margin_loss", "multilabel_soft_margin_loss", "triplet_margin_with_distance_loss",
})
_FULL_REDUCTIONS = frozenset({"mean", "sum", "max", "min", "norm", "prod", "std", "var", "median",
                              "all", "any", "amax", "amin", "nansum", "nanmean"})


def _reduction_none(call: ast.Call) -> bool:
    return any(k.arg == "reduction" and isinstance(k.value, ast.Constant) and k.value.value == "none"
               for k in call.keywords)


def _has_dim(call: ast.Call) -> bool:
    return bool(call.args) or any(k.arg in ("dim", "axis") for k in call.keywords)


_MAX_SCALAR_DEPTH = 10


class Reason(str):
    """Why a value is 0-dim (the text a finding quotes), holding the cross-file conditions (in the
    form of ``Finding.requires``) under which it is: a module of another file whose forward returns
    a 0-dim value (see ``scalar_forwards``)."""

    requires: tuple[frozenset[str], ...] = ()


def _reason(text: str, *parts: str | None) -> str:
    """``text``, holding the conditions of the reasons it was made of (each must hold)."""
    requires = tuple(r for part in parts for r in getattr(part, "requires", ()))
    if not requires:
        return text
    reason = Reason(text)
    reason.requires = requires
    return reason


def reason_requires(reason: str) -> tuple[frozenset[str], ...]:
    """The cross-file conditions under which ``reason`` (of ``scalar_reason``) holds."""
    return getattr(reason, "requires", ())


def scalar_reason(node: ast.AST, fn: FunctionInfo, model: ModelClass, depth: int = 0,
                  resolving: frozenset[str] = frozenset()) -> str | None:
    """Why ``node`` is a 0-dim tensor (a loss, a full reduction), or None.

    ``resolving``: local names whose values are being followed; inside them the name itself
    (`loss += w * crit(...)`, read back from `loss = 0`) is the running total, not a new value.
    """
    if depth > _MAX_SCALAR_DEPTH:
        return None
    ctx = model.ctx
    if isinstance(node, ast.Name):
        if node.id in resolving:
            return None
        for value in fn.local_values.get(node.id, ()):
            reason = scalar_reason(value, fn, model, depth + 1, resolving | {node.id})
            if reason:
                return reason
        return None
    if isinstance(node, ast.Attribute) or isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice) \
            and isinstance(node.value, ast.Attribute):
        stored = _stored_scalar(node, fn, model, depth, resolving)
        if stored is not None or isinstance(node, ast.Attribute):
            return stored
    if isinstance(node, ast.BinOp):
        sides = [node.left, node.right]
        reasons = [scalar_reason(s, fn, model, depth + 1, resolving) for s in sides]
        neutral = [_python_number(s, fn, model, resolving) for s in sides]
        if all(r or c for r, c in zip(reasons, neutral)) and any(reasons):
            return _reason(str(next(r for r in reasons if r)), *reasons)
        return None
    if isinstance(node, ast.UnaryOp):
        return scalar_reason(node.operand, fn, model, depth + 1, resolving)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) \
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int:
        # `loss_a, acc = compute_loss(...)` (bound as element k of the call): element k of its returns.
        callee = _callee(node.value, fn, model)
        if callee is not None:
            return _returned_scalar(callee, node.slice.value, model, depth)
        element = _scalar_module_element(node.value, node.slice.value, model, fn, depth)
        if element:
            return element
        if node.slice.value == 0 and _unpacked_loss_and_stats(node.value, fn) \
                and _is_loss_module_call(node.value, fn, model):
            return f"the first value of a loss from `{ast.unparse(node.value.func)}`"
        return None
    if not isinstance(node, ast.Call):
        return None
    name = ctx.resolve(node.func) or ""
    last = name.rsplit(".", 1)[-1]
    if name.startswith("torch.nn.functional.") and last in _LOSS_FUNCTIONS and not _reduction_none(node):
        return f"a loss from `{ast.unparse(node.func)}`"
    if name.startswith("torch.") and name.count(".") == 1 and last in _FULL_REDUCTIONS \
            and len(node.args) <= 1 and not any(k.arg in ("dim", "axis") for k in node.keywords):
        return f"`{ast.unparse(node.func)}` over all elements"
    if isinstance(node.func, ast.Attribute) and node.func.attr in _FULL_REDUCTIONS \
            and not _has_dim(node) and not name.startswith(("numpy.", "np.", "math.", "builtins.")):
        receiver = node.func.value
        if isinstance(receiver, ast.Name) and receiver.id in ("np", "numpy", "math", "torch"):
            return None
        return f"`.{node.func.attr}()` with no dim"
    if _is_loss_module_call(node, fn, model):
        return f"a loss from `{ast.unparse(node.func)}`"
    reason = _scalar_module_call(node, fn, model) or _scalar_held_method(node, fn, model, depth)
    if reason:
        return reason
    if isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_KEEPING_METHODS:
        # `loss.sum().div(b)`, `loss.float()`: a 0-dim receiver with numbers stays 0-dim.
        reason = scalar_reason(node.func.value, fn, model, depth + 1, resolving)
        if reason and (node.func.attr in _CONVERSIONS or all(
                _python_number(a, fn, model, resolving) for a in node.args)):
            return reason
        return None
    reason = _summed(node, fn, model, depth, resolving) or _passed_through(node, fn, model, depth, resolving)
    if reason is None:  # `weighted_l1(...)`, `self.calc_gradient_penalty(...)`: what the function returns
        callee = _callee(node, fn, model)
        if callee is not None:
            return _returned_scalar(callee, None, model, depth)
        return _imported_scalar_function(node, name, ctx)
    return reason


# Tensor methods whose result has the receiver's shape: given numbers (or, for conversions,
# anything), a 0-dim receiver gives a 0-dim result.
_CONVERSIONS = frozenset({"float", "double", "half", "bfloat16", "to", "cuda", "cpu", "type_as", "clone",
                          "detach", "contiguous"})
_SHAPE_KEEPING_METHODS = _CONVERSIONS | frozenset({
    "div", "mul", "add", "sub", "true_divide", "pow", "clamp", "neg", "abs", "sqrt", "exp", "log",
    "div_", "mul_", "add_", "sub_", "clamp_"})


def _callee(call: ast.Call, fn: FunctionInfo, model: ModelClass) -> FunctionInfo | None:
    """The function of this file a call runs: a method of the class (`self.helper(...)`), or a
    module-level function (`weighted_l1_loss(...)`) that no local name of the caller shadows."""
    if isinstance(call.func, ast.Attribute):
        return _helper_method(call, fn, model)
    if isinstance(call.func, ast.Name) and call.func.id in fn.local_values:
        # `criterion = self.multinoulli_loss` then `criterion(recon, target)`: that method, where
        # every value of the name is the same method of self.
        values = fn.local_values[call.func.id]
        attrs = {fn.self_attr(v) for v in values}
        if len(attrs) == 1 and None not in attrs:
            helper = model.find_method(attrs.pop())
            return helper if helper is not None and helper.name != "forward" else None
        return None
    if isinstance(call.func, ast.Name) and call.func.id not in fn.local_values:
        node = model.ctx.module_functions.get(call.func.id)
        if node is not None:
            return model.ctx.function(node, None)
    return None


def _imported_scalar_function(call: ast.Call, name: str, ctx: FileContext) -> str | None:
    """`utils.at_loss(x, y)`, `dice_loss(p, y)`: a function imported from another module of the
    project, 0-dim on the condition that every return of it is (``scalar_functions`` of its file)."""
    if "." not in name or name.startswith(_LIBRARY_PREFIXES) or not _class_reference(call.func, ctx):
        return None
    found = Reason(f"`{ast.unparse(call.func)}(...)`, every return of which is one")
    found.requires = (frozenset({f"{SCALAR_FUNCTION_CONDITION}{name}"}),)
    return found


# Packages whose functions no project module defines: a call of one is not looked up in the index.
_LIBRARY_PREFIXES = ("torch.", "numpy.", "math.", "np.", "scipy.", "einops.", "builtins.")


def _returned_scalar(callee: FunctionInfo, index: int | None, model: ModelClass, depth: int) -> str | None:
    """Why every value ``callee`` returns (element ``index`` of each returned tuple) is 0-dim, or None."""
    reasons = []
    for value in callee.returns():
        if index is not None:
            if not isinstance(value, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in value.elts) \
                    or not -len(value.elts) <= index < len(value.elts):
                return None
            value = value.elts[index]
        if _constant_tensor(value, model.ctx):
            continue  # `if x.shape[0] == 1: return torch.tensor([0.0])`: one value per replica as well
        reason = scalar_reason(value, callee, model, depth + 1)
        if reason is None:
            return None
        reasons.append(reason)
    return _reason(f"{reasons[0]}, returned by `{callee.name}()`", *reasons) if reasons else None


# torch's factories of a tensor from data (the first two also take a bare number: a 0-dim tensor;
# the legacy constructors read a bare int as a size), and of a filled one from a shape.
_DATA_FACTORIES = ("torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.cuda.FloatTensor")
_FILLED_FACTORIES = frozenset({"torch.zeros", "torch.ones"})


def _constant_tensor(node: ast.AST, ctx: FileContext) -> bool:
    """A tensor of one constant value: `torch.tensor(0.0)`, `torch.tensor([0], device=x.device)`,
    `torch.zeros(1)`, `torch.zeros(())`, moved or converted (`.cuda()`, `.float()`)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CONVERSIONS:
        node = node.func.value
    if not isinstance(node, ast.Call) or len(node.args) != 1:
        return False
    name = ctx.resolve(node.func) or ""
    arg = node.args[0]
    listed = isinstance(arg, (ast.List, ast.Tuple))
    if listed and len(arg.elts) > 1:
        return False
    item = (arg.elts[0] if arg.elts else None) if listed else arg
    number = isinstance(item, ast.Constant) and type(item.value) in (int, float)
    if name in _DATA_FACTORIES:
        return number and (listed or name in _DATA_FACTORIES[:2])
    return name in _FILLED_FACTORIES and (item is None or number and item.value == 1)


# Names of the values a loss module returns next to its loss for logging.
_STATS_WORDS = ("stat", "dict", "log", "info", "metric", "detail")


def _unpacked_loss_and_stats(call: ast.Call, fn: FunctionInfo) -> bool:
    """`loss, loss_stats = self.loss(outputs, batch)` (CenterNet), `loss, _ = ...`: a loss module that
    returns its loss and what it logs returns the loss first. Not `cls_loss, reg_loss = ...`: several
    component losses, whose shapes (a 0-dim mean or a per-replica `(1,)`) the call site does not show."""
    stmt = fn.parent(call)
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], (ast.Tuple, ast.List))):
        return False
    rest = stmt.targets[0].elts[1:]
    return bool(rest) and all(isinstance(e, ast.Name) and (
        e.id == "_" or any(w in e.id.lower() for w in _STATS_WORDS) or "loss" not in e.id.lower()) for e in rest)


def _python_number(node: ast.AST, fn: FunctionInfo, model: ModelClass, resolving: frozenset[str],
                   depth: int = 0) -> bool:
    """Is ``node`` a Python number (a weight), so that a 0-dim loss combined with it stays 0-dim?

    Constants, configuration reads off self (`self.opt.lambda_feat`, two attributes deep: not a
    layer or tensor of the model), the running total being resolved, and locals built only from those.
    """
    if depth > 4:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if _size_read(node):
        return True
    if isinstance(node, ast.Name):
        if _NUMERIC_OPTION + node.id in resolving:
            return True  # an option of forward left to its numeric default (``_scalar_forward_tokens``)
        if node.id in resolving:
            # The running total (`loss = loss + w * crit(...)`), unless the name holds a sequence:
            # `output = (loss) + output` in a `return_dict=False` arm concatenates (or raises); or it
            # is a parameter, whose first value is what the caller passed: `lens = lens + T -
            # lens.max()` shifts a per-sample tensor, it does not add to a total started at 0.
            return node.id not in parameters_of(fn) and not any(
                _sequence_value(v) for v in fn.local_values.get(node.id, ()))
        values = fn.local_values.get(node.id)
        return bool(values) and all(_python_number(v, fn, model, resolving | {node.id}, depth + 1) for v in values)
    if isinstance(node, ast.Attribute) and (attr := fn.self_attr(node)) is not None:
        return _stored_number(attr, model, resolving, depth)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and not isinstance(node.slice, ast.Slice) \
            and node.value.id not in resolving:
        # `level_weights[i]` of `level_weights = [w ** i for i in range(n)]` or `[1] * n`.
        values = fn.local_values.get(node.value.id)
        return bool(values) and all(_numbers(v, fn, model, resolving, depth + 1) for v in values)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) or isinstance(
            node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        # `self.opt.lambda_feat`, `self.config["l1_alpha"]`: an option read off a configuration object.
        attr = fn.self_attr(node.value)
        facts = model.attrs.get(attr) if attr is not None else None
        return facts is not None and not facts.kinds & (_WEIGHTED_KINDS | {"tensor"})
    if isinstance(node, ast.BinOp):
        return all(_python_number(s, fn, model, resolving, depth + 1) for s in (node.left, node.right))
    if isinstance(node, ast.UnaryOp):
        return _python_number(node.operand, fn, model, resolving, depth + 1)
    return False


# In ``resolving``, before a parameter's name: an option of forward taken for its numeric default.
_NUMERIC_OPTION = "number:"

# The operators of `self.total += v` that keep a 0-dim total 0-dim when ``v`` is 0-dim or a number.
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _self_key(name: str) -> str:
    """How ``resolving`` holds an attribute of self being followed (no local name has a dot)."""
    return "self." + name


def _stored_scalar(node: ast.Attribute | ast.Subscript, fn: FunctionInfo, model: ModelClass, depth: int,
                   resolving: frozenset[str]) -> str | None:
    """Why ``self.<name>`` (or an item ``self.<name>[key]``) read in ``fn`` is 0-dim: every value the
    class stores in it is 0-dim or a Python number, one at least 0-dim (PHiSeg's `self.loss_tot = 0`,
    then `self.loss_tot += w * torch.mean(...)` in the helpers forward calls, returned by the
    method forward calls for its loss); or None. Weights and submodules are not followed, nor an
    item of a dict the class fills other than item by item."""
    if isinstance(node, ast.Subscript):
        attr = fn.self_attr(node.value)
        if attr is None:
            return None
        whole = model.self_stores.get(attr)
        # `self.losses = {}` and item stores only: an item holds what the item stores put there.
        if not whole or not all(s.op is None and isinstance(s.value, ast.Dict) and not s.value.keys for s in whole):
            return None
        key = attr + ITEM
    else:
        attr = key = fn.self_attr(node)
        if attr is None:
            return None
    if _self_key(key) in resolving:
        return None
    facts = model.attrs.get(attr)
    if facts is not None and facts.kinds & (_WEIGHTED_KINDS | {"tensor", "container"}) and key == attr:
        return None
    stores = model.self_stores.get(key)
    if not stores:
        return None
    following = frozenset(r for r in resolving if r.startswith("self.")) | {_self_key(key)}
    reasons = []
    for store in stores:
        if store.op is not None and not isinstance(store.op, _ARITHMETIC):
            return None
        reason = scalar_reason(store.value, store.fn, model, depth + 1, following)
        if reason is None and not _python_number(store.value, store.fn, model, following):
            return None
        if reason:
            reasons.append(reason)
    if not reasons:
        return None
    held = f"self.{attr}[...]" if key != attr else f"self.{attr}"
    return _reason(f"{reasons[0]}, stored in `{held}`", *reasons)


def _stored_number(attr: str, model: ModelClass, resolving: frozenset[str], depth: int) -> bool:
    """Is ``self.<attr>`` a Python number: the running total being followed, or an attribute every
    store of which is a number (`self.kl_weight = 1.0`, a weight set once)?"""
    if _self_key(attr) in resolving:
        return True
    facts = model.attrs.get(attr)
    if facts is not None and facts.kinds & (_WEIGHTED_KINDS | {"tensor", "container"}):
        return False
    stores = model.self_stores.get(attr)
    following = frozenset(r for r in resolving if r.startswith("self.")) | {_self_key(attr)}
    return bool(stores) and all(
        (s.op is None or isinstance(s.op, _ARITHMETIC)) and _python_number(s.value, s.fn, model, following, depth + 1)
        for s in stores)


def _numbers(value: ast.AST, fn: FunctionInfo, model: ModelClass, resolving: frozenset[str], depth: int) -> bool:
    """Is ``value`` a list of Python numbers: `[1] * n`, `[1.0, 0.5]`, or `[w ** i for i in range(n)]`
    (a comprehension over `range` whose element is a number given its integer variables)?"""
    if isinstance(value, (ast.List, ast.Tuple)):
        return bool(value.elts) and all(_python_number(e, fn, model, resolving, depth) for e in value.elts)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        # A list times anything is that list repeated (or a TypeError): its elements whatever `n` is.
        return _numbers(value.left, fn, model, resolving, depth)
    if isinstance(value, ast.ListComp) and len(value.generators) == 1:
        loop = value.generators[0]
        source = loop.iter
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "list" \
                and len(source.args) == 1:
            source = source.args[0]
        if isinstance(loop.target, ast.Name) and isinstance(source, ast.Call) \
                and isinstance(source.func, ast.Name) and source.func.id == "range":
            # The loop variable is an int: followed as a number, as the running total is.
            return _python_number(value.elt, fn, model, resolving | {loop.target.id}, depth)
    return False


def _sequence_value(value: ast.AST) -> bool:
    """A tuple or list built here, or `tuple(...)` / `list(...)` of something."""
    return isinstance(value, (ast.Tuple, ast.List, ast.ListComp)) or isinstance(value, ast.Call) \
        and isinstance(value.func, ast.Name) and value.func.id in ("tuple", "list")


def _size_read(node: ast.AST) -> bool:
    """A Python int read off a tensor's shape: `x.size(0)`, `x.shape[0]`, element k of `x.size()`
    (`b, c = x.size()`), `x.numel()`, `len(x)`."""
    if isinstance(node, ast.Subscript):
        value = node.value
        return (isinstance(value, ast.Attribute) and value.attr == "shape") or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size")
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return (func.attr == "size" and len(node.args) == 1) or (func.attr == "numel" and not node.args)
        return isinstance(func, ast.Name) and func.id == "len"
    return False


def _summed(call: ast.Call, fn: FunctionInfo, model: ModelClass, depth: int,
            resolving: frozenset[str] = frozenset()) -> str | None:
    """`sum(losses)`, `sum(F.l1_loss(a, b) for a, b in pairs)`: Python's `sum` of values that are each
    0-dim (a display, a comprehension, or a local list whose every item, displayed or appended, is),
    from a number start, adds 0-dim tensors into one: 0-dim."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "sum" and call.func.id not in fn.local_values
            and "sum" not in model.ctx.imports.aliases and "sum" not in model.ctx.module_functions) \
            or not 1 <= len(call.args) <= 2 or call.keywords and call.keywords[0].arg != "start":
        return None
    start = call.args[1:] + [k.value for k in call.keywords]
    if start and not _python_number(start[0], fn, model, resolving):
        return None
    items = _list_items(call.args[0], fn)
    if not items:
        return None
    reasons = []
    for item in items:
        reason = scalar_reason(item, fn, model, depth + 1, resolving)
        if reason is None:
            return None
        reasons.append(reason)
    return _reason(f"`sum` of {reasons[0]}", *reasons)


def _list_items(node: ast.AST, fn: FunctionInfo) -> list[ast.AST]:
    """The values a list holds: a display's elements, a comprehension's element, or those of a local
    bound only to such lists, with what `name.append(x)` adds; empty where any is not known."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [] if any(isinstance(e, ast.Starred) for e in node.elts) else list(node.elts)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return [node.elt]
    if not isinstance(node, ast.Name) or node.id not in fn.local_values:
        return []
    items = []
    for value in fn.local_values[node.id]:
        if not isinstance(value, (ast.List, ast.Tuple, ast.ListComp)):
            return []  # `losses += [x]`, `losses = other`: not followed
        items.extend(_list_items(value, fn) if not (isinstance(value, ast.List) and not value.elts) else ())
    for call in fn.nodes(ast.Call):
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == node.id:
            if func.attr != "append" or len(call.args) != 1:
                return []  # `extend`, `insert`, ...: what else goes in is not followed
            items.append(call.args[0])
    return items


def _passed_through(call: ast.Call, fn: FunctionInfo, model: ModelClass, depth: int,
                    resolving: frozenset[str] = frozenset()) -> str | None:
    """`self.loss_filter(loss_a, loss_b)`: a plain callable (no module with weights) given only
    0-dim values and numbers returns 0-dim values or containers of them.

    ``resolving`` goes on into the arguments: `x = blk(x)` read back while resolving `x` is not
    followed again (each of x's values would re-enter all of them: exponential in the depth)."""
    if not call.args or call.keywords:
        return None
    # (A function of no class, a module-level helper, has no `self`: its first parameter is data.)
    attr = fn.self_attr(call.func) if fn.owner is not None else None
    if attr is not None:
        facts = model.attrs.get(attr)
        if facts is not None and facts.kinds & _WEIGHTED_KINDS:
            return None
        closures = _stored_closures(call, fn, model)
        if closures is not None and not all(_returns_parameters(inner) for inner in closures):
            return None  # a closure we can read that builds something else from its arguments
    elif not isinstance(call.func, ast.Name) or call.func.id in ("dict", "tuple", "list"):
        return None
    reasons = []
    for arg in call.args:
        if isinstance(arg, ast.Constant):
            continue
        reason = scalar_reason(arg, fn, model, depth + 1, resolving)
        if reason is None:
            return None
        reasons.append(reason)
    return _reason(f"{reasons[0]}, passed through `{ast.unparse(call.func)}`", *reasons) if reasons else None


def _is_loss_module_call(call: ast.Call, fn: FunctionInfo, model: ModelClass) -> bool:
    """`self.criterion(...)` or `loss_fct(...)` where that is an nn.*Loss built without reduction='none'."""
    func = call.func
    constructions: list[ast.AST] = []
    attr = fn.self_attr(func)
    if attr is not None:
        facts = model.attrs.get(attr)
        if facts:
            constructions = [v for _, v, _ in facts.assignments]
    elif isinstance(func, ast.Name):
        constructions = list(fn.local_values.get(func.id, ()))
    if attr is not None:
        constructions = [default for value in constructions for default in _parameter_defaults(value, model)]
    known = False
    for value in constructions:
        if isinstance(value, ast.Call):
            name = model.ctx.resolve(value.func) or (value.func.id if isinstance(value.func, ast.Name) else "")
            last = name.rsplit(".", 1)[-1]
            if _reduction_none(value):
                return False
            if last.endswith("Loss") or (last and "Criterion" in last):
                return True  # torch.nn.*Loss, or a project's loss class (`networks.GANLoss(...)`)
            known = known or last[:1].isupper()  # a class we can name, and it is not a loss
    # `self.criterion = criterion` / `self.loss = args.loss_class(...)`: a callable stored under a
    # loss's name whose class cannot be seen.
    lowered = (attr or "").lower()
    return attr in model.attrs and not known and (
        "criterion" in lowered or lowered in _LOSS_ATTRS)


_LOSS_ATTRS = frozenset({"loss", "loss_fn", "loss_func", "loss_fct", "lossfn", "loss_function", "loss_module"})


# --- modules whose forward returns a 0-dim value ----------------------------------------
#
# A model often returns what a module of its own project computes: `loss = self.crf(emissions,
# tags, mask)` (pytorch-crf's mean log-likelihood), a loss head with layers of its own. Which
# classes' forward returns a 0-dim value is a fact of their file (``scalar_forwards``), kept in the
# per-file results for other files' calls (``FileResult.scalar_forwards``); a call of such a class
# is 0-dim on the condition ``scalar_forward:<class>:<how the call passes arguments>``, which the
# class index settles (``index.ClassIndex.returns_scalar``), in this file as in another.

SCALAR_FORWARD_CONDITION = "scalar_forward:"
# In a summary's token, the values of an option under which forward returns 0-dim: this one stands
# for "left to its default" (the other values are `repr`s of constants).
DEFAULT_VALUE = "*"


def _scalar_module_call(call: ast.Call, fn: FunctionInfo, model: ModelClass, index: int | None = None) -> str | None:
    """`self.crf(emissions, tags, mask)`: a call of a module of a project class (held by `self` or
    a local, built by one constructor) whose forward returns a 0-dim value when called so (with
    ``index``: element ``index`` of the tuples it returns, for a class of another file)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None  # `*args`, `**kwargs`: which options it passes cannot be told
    name = _module_class(call, fn, model)
    if not name or name.startswith("torch."):
        return None
    passed = ",".join([str(len(call.args)), *(f"{k.arg}={_option_value(k.value) or ''}" for k in call.keywords)])
    reason = f"`{ast.unparse(call.func)}(...)`, whose `{name.rsplit('.', 1)[-1]}.forward` returns one"
    if index is not None:
        reason = f"element {index} of `{ast.unparse(call.func)}(...)`, which `{name.rsplit('.', 1)[-1]}.forward` " \
                 "makes 0-dim in every tuple it returns"
        name += _ELEMENT.format(index)
    local = model.ctx.local_name(name)
    if local is not None:  # a class of this file: decided here
        tokens = _class_scalar_tokens(model.ctx, local)
        return reason if tokens is not None and scalar_call(tokens, passed) else None
    found = Reason(reason)
    found.requires = (frozenset({f"{SCALAR_FORWARD_CONDITION}{name}:{passed}"}),)
    return found


def _scalar_held_method(call: ast.Call, fn: FunctionInfo, model: ModelClass, depth: int) -> str | None:
    """`self.loss_fct.cal_loss(logits, labels)`: a method other than forward of a module held by
    `self` (or a local) whose class is one of this file, every return of which is 0-dim."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr == "forward":
        return None
    name = _held_class(func.value, fn, model)
    local = model.ctx.local_name(name) if name else None
    held = _models_by_name(model.ctx).get(local) if local else None
    method = held.find_method(func.attr) if held is not None else None
    if method is None or method.name == "forward":
        return None
    return _returned_scalar(method, None, held, depth)


def _module_class(call: ast.Call, fn: FunctionInfo, model: ModelClass) -> str | None:
    """The resolved name of the one project class whose instance a module call runs (held by `self`
    or a local, built by one constructor), or None."""
    return _held_class(call.func, fn, model)


def _held_class(held: ast.AST, fn: FunctionInfo, model: ModelClass) -> str | None:
    """The resolved name of the one project class of the instance ``held`` (`self.<attr>` or a
    local, built by one constructor), or None."""
    names = _held_classes(held, fn, model)
    return names.pop() if names and len(names) == 1 else None


def _held_classes(held: ast.AST, fn: FunctionInfo, model: ModelClass) -> set[str] | None:
    """The resolved names of the classes whose constructors build the instance ``held`` (`self.<attr>`
    or a local) wherever it is built (`if q_type == 'pro': self.vq = ProductQuantization(...)`
    `elif ...: self.vq = ResidualQuantization(...)`), or None where a value is not such a call."""
    attr = fn.self_attr(held)
    if attr is not None:
        facts = model.attrs.get(attr)
        constructions = [v for _, v, _ in facts.assignments] if facts else []
    elif isinstance(held, ast.Name):
        constructions = list(fn.local_values.get(held.id, ()))
    else:
        return None
    if not constructions or not all(isinstance(v, ast.Call) and _class_reference(v.func, model.ctx)
                                    for v in constructions):
        return None
    return {model.ctx.resolve(v.func) for v in constructions}


def _scalar_module_element(call: ast.Call, index: int, model: ModelClass, fn: FunctionInfo,
                           depth: int) -> str | None:
    """`heads, loss = self.heads(x)` (element ``index`` of a module call): why that element is 0-dim
    where the module is of a class of this file whose forward returns tuples, each one long enough
    to have it holding a 0-dim value there (a return too short cannot be the one unpacked so), or None.
    A class of another file is decided by its summary (``scalar_forwards``, the element's entry)."""
    name = _module_class(call, fn, model)
    local = model.ctx.local_name(name) if name else None
    held = _models_by_name(model.ctx).get(local) if local else None
    forward = held.forward if held is not None else None
    if forward is None:
        return _scalar_module_call(call, fn, model, index) if name and local is None else None
    reasons = []
    for value in forward.returns():
        if not isinstance(value, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in value.elts):
            return None
        if -len(value.elts) <= index < len(value.elts):
            reason = scalar_reason(value.elts[index], forward, held, depth + 1)
            if reason is None:
                return None
            reasons.append(reason)
    return _reason(f"{reasons[0]}, returned by `{ast.unparse(call.func)}(...)`", *reasons) if reasons else None


def _class_reference(func: ast.AST, ctx: FileContext) -> bool:
    """`CRF`, `crf.CRF`: a class of this file or a name read off an import (not `self.make_head`,
    not a local callable)."""
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    return root.id in ctx.imports.aliases or (root is func and root.id in ctx.classes)


def scalar_call(tokens: list[str], passed: str) -> bool:
    """Does a call that passes ``passed`` (`<positional count>,<keyword>=<value>,...`, the value
    empty where it is not a constant) run only returns that are 0-dim, by a class's ``tokens``
    (see ``scalar_forwards``)? Each deciding option left to its default, or one of them given a
    value under which they are (the others at their defaults); never one given by position."""
    count, *keywords = passed.split(",")
    given = dict(k.partition("=")[::2] for k in keywords)
    chosen = []
    for token in tokens:
        option, _, rest = token.partition("@")
        position, _, allowed = rest.partition("=")
        values = allowed.split("|")
        if 0 <= int(position) < int(count):
            return False
        if option in given:
            chosen.append(given[option] in values)
    if not chosen:  # every deciding option left to its default: a summary of no tokens holds then
        return all(DEFAULT_VALUE in token.rpartition("=")[2].split("|") for token in tokens)
    return len(chosen) == 1 and chosen[0]


def _option_value(node: ast.AST) -> str | None:
    """A constant option value as a summary token writes it (`'mean'`, `True`, `2`), or None."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, (str, int, float, bool, type(None))):
        return None
    text = repr(node.value)
    return text if len(text) <= 40 and not any(c in text for c in " ,|:=") else None


def scalar_forwards(ctx: FileContext) -> dict[str, list[str]]:
    """Module classes of this file whose forward returns a 0-dim value (qualified name -> tokens
    `<option>@<position>=<value>|...`: for each option of forward that decides which return runs,
    the values under which every return that can run is 0-dim, the others left to their defaults;
    ``DEFAULT_VALUE`` for its default). pytorch-crf's CRF returns `llh` under `reduction ==
    'none'` and a 0-dim value otherwise: `reduction@3=*|'mean'|'sum'`."""
    return ctx.fact(_find_scalar_forwards)


def _find_scalar_forwards(ctx: FileContext) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, info in ctx.classes.items():
        tokens = _class_scalar_tokens(ctx, name)
        if tokens is not None:
            found[info.qualname] = tokens
        # `y, aux_loss = self.moe(x)` in another file: element k of a forward that returns tuples.
        model = ctx.fact(_models_by_name).get(name)
        forward = model.forward if model is not None else None
        length = _tuple_length(forward) if forward is not None and forward.owner is model.info else 0
        if length and _may_reduce(model.in_forward):
            for index in range(length):
                tokens = _scalar_forward_tokens(model, forward, index)
                if tokens is not None:
                    found[f"{info.qualname}{_ELEMENT.format(index)}"] = tokens
    return found


def _may_reduce(fns: list[FunctionInfo], ctx: FileContext | None = None) -> bool:
    """Can these functions make a 0-dim value at all: does one of them call a full reduction (no
    dim), a loss function, something named like a loss or criterion, or (with ``ctx``) a module-level
    function of the file? A cheap test that spares the summaries most functions and layers."""
    for fn in fns:
        for call in fn.nodes(ast.Call):
            func = call.func
            last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            lowered = last.lower()
            if last in _FULL_REDUCTIONS and not _has_dim(call) or last in _LOSS_FUNCTIONS \
                    or "loss" in lowered or "crit" in lowered \
                    or ctx is not None and isinstance(func, ast.Name) and last in ctx.module_functions:
                return True
    return False


# How a summary names element k of what a class's forward returns (`pkg.layers.MoE[1]`).
_ELEMENT = "[{}]"


def _tuple_length(forward: FunctionInfo) -> int:
    """The length of the tuples forward returns where every return is a tuple display of that one
    length (no starred item), else 0."""
    lengths = {len(v.elts) if isinstance(v, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in v.elts)
               else 0 for v in forward.returns()}
    return lengths.pop() if len(lengths) == 1 else 0


_PENDING = object()


def _class_scalar_tokens(ctx: FileContext, name: str) -> list[str] | None:
    """``scalar_forwards``' tokens of the module class of this file named ``name``, or None; each
    class decided once (and not while it is being decided: a forward that reaches its own class)."""
    decided = ctx.fact(_no_classes_decided)
    tokens = decided.get(name, _PENDING)
    if tokens is not _PENDING:
        return tokens
    decided[name] = None
    model = ctx.fact(_models_by_name).get(name)
    forward = model.forward if model is not None else None
    if forward is not None and forward.owner is model.info:  # (an inherited one: summarised with its class)
        decided[name] = _scalar_forward_tokens(model, forward)
    return decided[name]


def _no_classes_decided(ctx: FileContext) -> dict:
    return {}


def _models_by_name(ctx: FileContext) -> dict[str, ModelClass]:
    from dpcheck.analysis.model_class import file_models

    return {model.name: model for model in file_models(ctx)}


def _scalar_forward_tokens(model: ModelClass, forward: FunctionInfo, index: int | None = None) -> list[str] | None:
    """``scalar_forwards``' tokens of forward's returns (of element ``index`` of each, a tuple display)."""
    returns = [node for node in forward.nodes(ast.Return)
               if node.value is not None and forward.enclosing(node, FunctionNode) is forward.node]
    if not returns:
        return None
    args = forward.node.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)][1:]  # (after `self`)
    options = {name: default for name, default in parameter_defaults(args).items()
               if isinstance(default, ast.Constant) and name not in forward.local_values}
    # The options the tests above the returns compare, with the constants they compare them to.
    compared: dict[str, set] = {}
    for node in returns:
        for test, _ in _tests_above(node, forward):
            for name, values in _option_constants(test, options):
                compared.setdefault(name, set()).update(values)
    memo: dict[tuple[int, frozenset[str]], bool] = {}

    def all_scalar(values: dict, numbers: frozenset[str]) -> bool:
        reachable = [n for n in returns if _reachable(n, forward, values)]
        for node in reachable:
            if (id(node), numbers) not in memo:
                memo[id(node), numbers] = _every_value_scalar(
                    node.value if index is None else node.value.elts[index], forward, model, numbers)
            if not memo[id(node), numbers]:
                return False
        return bool(reachable)

    defaults = {name: default.value for name, default in options.items()}
    # Numeric options (`loss_coef=1`, which `loss *= loss_coef` weighs the loss by) are numbers only
    # while the caller leaves them out: asked only where the returns are not 0-dim without them, and
    # then a token of theirs says that a call must leave them to their defaults.
    numbers: frozenset[str] = frozenset()
    by_default = all_scalar(defaults, numbers)
    weights = frozenset(_NUMERIC_OPTION + name for name, value in defaults.items() if type(value) in (int, float))
    if not by_default and weights and all_scalar(defaults, weights):
        numbers, by_default = weights, True
    tokens = []
    for name in sorted(compared):
        # (the default given explicitly is the default)
        allowed = [DEFAULT_VALUE, _option_value(options[name]) or DEFAULT_VALUE] if by_default else []
        for value in sorted(compared[name] - {defaults[name]}, key=repr):
            text = _option_value(ast.Constant(value))
            if text is not None and all_scalar({**defaults, name: value}, numbers):
                allowed.append(text)
        if allowed:
            tokens.append(f"{name}@{_position(name, positional)}={'|'.join(allowed)}")
    taken = {name.removeprefix(_NUMERIC_OPTION) for name in numbers}
    tokens += [f"{name}@{_position(name, positional)}={DEFAULT_VALUE}" for name in sorted(taken - set(compared))]
    if not by_default and not tokens:
        return None
    return tokens


def _position(name: str, positional: list[str]) -> int:
    """Where a call passes the option ``name`` by position (-1: by keyword only), as a token writes it."""
    return positional.index(name) if name in positional else -1


def _every_value_scalar(node: ast.AST, fn: FunctionInfo, model: ModelClass,
                        numbers: frozenset[str] = frozenset()) -> bool:
    """Is ``node`` 0-dim on every path, in this file alone: a returned name by every value bound to
    it (less an initial constant and values a later binding rebuilds, as ``_leaves`` follows them).
    (``scalar_reason`` takes a name for 0-dim when one of its values is, as the output rule reports
    each returned value; a summary must hold for all of them, and a layer's output usually disproves it
    at its first value.) ``numbers``: parameters taken for Python numbers (options left to numeric
    defaults), each as ``_NUMERIC_OPTION`` + its name."""
    if isinstance(node, ast.Name):
        # `loss *= loss_coef`, `loss = loss / n`: a 0-dim total weighed by a number stays 0-dim (it is
        # the other values that decide).
        values = [v for v in fn.local_values.get(node.id, ()) if not (
            isinstance(v, ast.BinOp) and isinstance(v.left, ast.Name) and v.left.id == node.id
            and isinstance(v.op, _ARITHMETIC) and _python_number(v.right, fn, model, numbers))]
        if not values:
            return False
        if len(values) > 1:
            values = [v for v in values if not isinstance(v, ast.Constant)] or values
            values = _not_rebuilt(node.id, values, fn)
        resolving = numbers | {node.id}
        for value in values:
            reason = scalar_reason(value, fn, model, 1, resolving)
            if not reason or reason_requires(reason):
                return False
        return True
    reason = scalar_reason(node, fn, model, 0, numbers)
    return bool(reason) and not reason_requires(reason)


def _tests_above(node: ast.AST, fn: FunctionInfo) -> Iterator[tuple[ast.AST, bool]]:
    """(test, whether ``node`` runs when it holds) of each `if` around ``node`` in ``fn``."""
    child, cur = node, fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, ast.If) and (child in cur.body or child in cur.orelse):
            yield cur.test, child in cur.body
        child, cur = cur, fn.parent(cur)


def _reachable(node: ast.AST, fn: FunctionInfo, values: dict) -> bool:
    """Can ``node`` run when forward's options hold ``values``? False only where an `if` test
    around it reads options alone and decides against it."""
    for test, when in _tests_above(node, fn):
        value = _evaluate(test, values)
        if value is not None and value != when:
            return False
    return True


_UNKNOWN = object()


def _evaluate(test: ast.AST, values: dict) -> bool | None:
    """The truth of an `if` test that reads only options of known value (`reduction == 'none'`,
    `mode in ('a', 'b')`, `not flag`, `and`/`or` of such), or None."""
    value = _evaluated(test, values)
    return None if value is _UNKNOWN else bool(value)


def _evaluated(node: ast.AST, values: dict):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values.get(node.id, _UNKNOWN)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_evaluated(e, values) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else tuple(items)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _evaluated(node.operand, values)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(node, ast.BoolOp):
        parts = [_evaluated(v, values) for v in node.values]
        if any(p is _UNKNOWN for p in parts):
            return _UNKNOWN
        return (all if isinstance(node.op, ast.And) else any)(bool(p) for p in parts)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _evaluated(node.left, values), _evaluated(node.comparators[0], values)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        op = node.ops[0]
        try:
            if isinstance(op, (ast.Eq, ast.Is)):
                return left == right if isinstance(op, ast.Eq) else left is right
            if isinstance(op, (ast.NotEq, ast.IsNot)):
                return left != right if isinstance(op, ast.NotEq) else left is not right
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, tuple):
                return (left in right) == isinstance(op, ast.In)
        except TypeError:
            return _UNKNOWN
    return _UNKNOWN


def _option_constants(test: ast.AST, options: dict) -> Iterator[tuple[str, list]]:
    """The options a test compares, each with the constants it is compared to (`reduction ==
    'none'`: ('reduction', ['none'])); a flag (a True, False or None default) with those three."""
    for sub in ast.walk(test):
        if isinstance(sub, ast.Name) and sub.id in options:
            yield sub.id, [True, False, None] if isinstance(options[sub.id].value, (bool, type(None))) else []
        elif isinstance(sub, ast.Compare) and len(sub.ops) == 1 and isinstance(sub.left, ast.Name) \
                and sub.left.id in options:
            right = sub.comparators[0]
            elts = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
            yield sub.left.id, [e.value for e in elts if isinstance(e, ast.Constant)]


SCALAR_FUNCTION_CONDITION = "scalar_function:"


class CodeOfNoClass:
    """What ``scalar_reason`` reads of a class, for code that belongs to none (a module-level
    function, a function nested in a script's `main`): no attributes of self, no stores, no methods."""

    attrs: dict = {}
    self_stores: dict = {}

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    def find_method(self, name: str, after=None) -> None:
        return None

    def function(self, node: FunctionNode, owner) -> FunctionInfo:
        return self.ctx.function(node, owner)


def scalar_functions(ctx: FileContext) -> list[str]:
    """This file's module-level functions every return of which is 0-dim, in this file alone
    (`def at_loss(x, y): return (at(x) - at(y)).pow(2).mean()`): a call of one from another file is
    0-dim on ``scalar_function:<its dotted name>``."""
    plain = CodeOfNoClass(ctx)
    found = []
    for name, node in ctx.module_functions.items():
        fn = ctx.function(node, None)
        returns = list(fn.returns())
        if returns and _may_reduce([fn], ctx) and all(_every_value_scalar(value, fn, plain) for value in returns):
            found.append(name)
    return found


def summarize_scalar_forwards(ctx: FileContext, result) -> None:
    """Fill ``result.scalar_forwards``, ``result.scalar_functions`` and ``result.non_tensor_forwards``
    for the class index (see ``scalar_forwards``, ``scalar_functions``, ``non_tensor_forwards``)."""
    if "return" in ctx.source.text:
        result.scalar_forwards = scalar_forwards(ctx)
        result.scalar_functions = scalar_functions(ctx)
        result.non_tensor_forwards = non_tensor_forwards(ctx)


def _parameter_defaults(value: ast.AST, model: ModelClass) -> list[ast.AST]:
    """`self.criterion = criterion` in __init__: the parameter's default, if it has one."""
    if not isinstance(value, ast.Name):
        return [value]
    init = model.find_method("__init__")
    if init is None:
        return [value]
    args = init.node.args
    defaults = parameter_defaults(args)
    if value.id in defaults:
        return [defaults[value.id]]
    return [] if value.id in {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} else [value]


_PY_VALUE_CALLS = frozenset({"float", "int", "str", "bool", "len", "round", "repr", "format"})
# Third-party layers whose decoding method returns Python lists (one list of tag indices per
# sample), not a tensor: (the layer's class, the method). pytorch-crf (`torchcrf`) and TorchCRF.
LIST_DECODING_LAYERS = frozenset({("torchcrf.CRF", "decode"), ("TorchCRF.CRF", "viterbi_decode")})
# The package whose classes build probability distributions (and their transforms and
# constraints): objects gather cannot take apart, since it iterates whatever is not a tensor, a
# mapping or a sequence. Its classes are the capitalised names; its functions (`kl_divergence`)
# return tensors.
DISTRIBUTIONS_PACKAGE = "torch.distributions"


def non_tensor_reason(node: ast.AST, fn: FunctionInfo, model: ModelClass) -> str | None:
    """Why ``node`` is a Python value that gather cannot handle, or None."""
    if isinstance(node, ast.Constant):
        if node.value is None or node.value is Ellipsis:
            return None
        return f"a Python {type(node.value).__name__} constant"
    if isinstance(node, ast.JoinedStr):
        return "a string"
    if isinstance(node, ast.Compare) or (isinstance(node, ast.BoolOp)):
        return None  # tensor comparisons are tensors; cannot tell
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and not node.args:
        return f"`.{func.attr}()` (a Python {'number' if func.attr == 'item' else 'list'})"
    if isinstance(func, ast.Name) and func.id in _PY_VALUE_CALLS and func.id not in fn.local_values:
        return f"`{func.id}(...)` (a Python {func.id if func.id != 'len' else 'int'})"
    if isinstance(func, ast.Name) and func.id in model.ctx.classes and func.id not in fn.local_values:
        info = model.ctx.classes[func.id]
        if _plain_dataclass(model.ctx, info, 0):
            return f"a `{func.id}` dataclass instance"
        if _plain_object_class(info) and not _state_handed_back(node, fn):
            return f"a `{func.id}` instance (a plain class, which gather cannot iterate)"
    layer = _list_decoding_layer(func, model)
    if layer is not None:
        return f"`self.{func.value.attr}.{func.attr}(...)` of {layer} (Python lists of tag indices)"
    if not (isinstance(func, ast.Name) and func.id in fn.local_values):
        distribution = _distribution_class(model.ctx.resolve(func), model.ctx, 0)
        if distribution is not None:
            written = dotted(func) or distribution
            if written.rpartition(".")[2] == distribution.rpartition(".")[2]:
                return f"a `{distribution}` object"
            return f"a `{written}` object (a `{distribution}`)"
    return _non_tensor_module_call(node, fn, model)


def _state_handed_back(value: ast.AST, fn: FunctionInfo) -> bool:
    """Is ``value`` bound to a parameter of ``fn`` (`if use_cache and padding_cache is None:
    padding_cache = PaddingCache()`): the caller's state object, made when it passes none, handed back
    for the next call of a step-by-step (streaming, cached) use, not an output of every call."""
    args = fn.node.args
    return any(value is bound for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)
               for bound in fn.local_values.get(arg.arg, ()))


def _ungatherable_class(ctx: FileContext, info) -> bool:
    """A class of this file whose instances gather cannot take apart: a plain dataclass or a plain class."""
    return _plain_dataclass(ctx, info, 0) or _plain_object_class(info)


# What makes a class's instances iterable (or rebuildable from an iterable): gather's fallback,
# `type(out)(map(gather_map, zip(*outputs)))`, may then take them apart.
_ITERATION_METHODS = frozenset({"__iter__", "__getitem__", "__len__", "__new__"})


def _plain_object_class(info) -> bool:
    """`class QuantizationOutput():` (or `(object)`), undecorated, with no metaclass and no way to be
    iterated: gather's fallback, `zip(*outputs)`, raises `TypeError: ... object is not iterable`."""
    node = info.node
    return not node.decorator_list and not node.keywords \
        and all(isinstance(base, ast.Name) and base.id == "object" for base in node.bases) \
        and not _ITERATION_METHODS & set(info.methods)


# A condition on the project index: the named module class's forward returns, on every return, a
# value gather cannot take apart (``non_tensor_forwards``).
NON_TENSOR_FORWARD_CONDITION = "non_tensor_forward:"


def _non_tensor_module_call(call: ast.Call, fn: FunctionInfo, model: ModelClass) -> str | None:
    """`self.vq_layer(z)`: a call of a module held by `self` (or a local) every construction of which
    is of a project class whose forward returns, on every return, a value gather cannot take apart
    (`return QuantizationOutput(quantized, loss)`); a class of another file is decided by its summary."""
    names = _held_classes(call.func, fn, model)
    if not names or any(name.startswith("torch.") for name in names):
        return None
    requires = []
    for name in sorted(names):
        local = model.ctx.local_name(name)
        if local is None:
            requires.append(frozenset({f"{NON_TENSOR_FORWARD_CONDITION}{name}"}))
        elif _class_non_tensor_forward(model.ctx, local) is None:
            return None
    forwards = ", ".join(f"`{name.rsplit('.', 1)[-1]}.forward`" for name in sorted(names))
    reason = Reason(f"what `{ast.unparse(call.func)}(...)` returns, which every return of {forwards} "
                    "makes a Python object, not a tensor")
    reason.requires = tuple(requires)
    return reason


def non_tensor_forwards(ctx: FileContext) -> list[str]:
    """Module classes of this file (qualified names) whose own forward returns, on every return, a
    value gather cannot take apart (``non_tensor_reason``): what a module of another file that calls
    one and returns the result returns too (``non_tensor_forward:<class>``)."""
    return ctx.fact(_find_non_tensor_forwards)


def _find_non_tensor_forwards(ctx: FileContext) -> list[str]:
    return [info.qualname for name, info in ctx.classes.items() if _class_non_tensor_forward(ctx, name)]


def _class_non_tensor_forward(ctx: FileContext, name: str) -> str | None:
    """Why every return of the own forward of this file's module class ``name`` is a value gather
    cannot take apart, or None; each class decided once (None while it is being decided)."""
    decided = ctx.fact(_no_non_tensor_forwards_decided)
    if name in decided:
        return decided[name]
    decided[name] = None
    info = ctx.classes[name]
    node = info.methods.get("forward")
    if node is None:
        return None
    # Cheap first: every return is a call, a constant or a string, or a name bound only to such.
    own = ctx.function(node, info)
    returns = list(own.returns())
    if not returns or not all(_object_like(value, own) for value in returns):
        return None
    model = ctx.fact(_models_by_name).get(name)
    forward = model.forward if model is not None else None
    if forward is None or forward.owner is not info:
        return None
    returns = list(forward.returns())
    reasons = []
    for value in returns:
        values = forward.local_values.get(value.id, ()) if isinstance(value, ast.Name) else (value,)
        found = [non_tensor_reason(v, forward, model) for v in values]
        # (a reason that holds only on another file's summary is not followed a second step)
        if not found or None in found or any(reason_requires(r) for r in found):
            return None
        reasons.append(found[0])
    decided[name] = reasons[0]
    return decided[name]


def _object_like(value: ast.AST, fn: FunctionInfo) -> bool:
    if isinstance(value, ast.Name):
        values = fn.local_values.get(value.id, ())
        return bool(values) and all(isinstance(v, (ast.Call, ast.Constant, ast.JoinedStr)) for v in values)
    return isinstance(value, (ast.Call, ast.Constant, ast.JoinedStr))


def _no_non_tensor_forwards_decided(ctx: FileContext) -> dict:
    return {}


def _distribution_class(name: str | None, ctx: FileContext, depth: int) -> str | None:
    """The torch.distributions class that calling ``name`` constructs: the class itself
    (`Normal`, `torch.distributions.Normal`), a module-level alias of this file
    (`FixedNormal = torch.distributions.Normal`) or a class of this file derived from one
    (`class FixedCategorical(torch.distributions.Categorical)`); else None."""
    if not name or depth > 8:
        return None
    package, _, leaf = name.rpartition(".")
    if (package == DISTRIBUTIONS_PACKAGE or package.startswith(DISTRIBUTIONS_PACKAGE + ".")) and leaf[:1].isupper():
        return name
    local = ctx.local_name(name)
    if local is None:
        return None
    values = ctx.module_level_values.get(local, ())
    if len(values) == 1 and isinstance(values[0], (ast.Name, ast.Attribute)):
        return _distribution_class(ctx.resolve(values[0]), ctx, depth + 1)
    info = ctx.classes.get(local)
    if info is not None:
        for base in info.bases:
            found = _distribution_class(base, ctx, depth + 1)
            if found is not None:
                return found
    return None


def _list_decoding_layer(func: ast.AST, model: ModelClass) -> str | None:
    """`self.crf.decode(...)` where every construction stored in `self.crf` outside forward is a
    layer of LIST_DECODING_LAYERS whose decoding method this is: that class's dotted name."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
            and isinstance(func.value.value, ast.Name) and func.value.value.id == "self"):
        return None
    facts = model.attrs.get(func.value.attr)
    if facts is None or not facts.assignments:
        return None
    classes = {model.ctx.resolve(value.func) if isinstance(value, ast.Call) else None
               for _, value, _ in facts.assignments}
    if len(classes) == 1:
        (name,) = classes
        if (name, func.attr) in LIST_DECODING_LAYERS:
            return f"`{name}`"
    return None


def _plain_dataclass(ctx: FileContext, info, depth: int) -> bool:
    """A @dataclass whose bases are all plain dataclasses of this file (or none).

    Dataclasses built on a dict (transformers' ModelOutput, diffusers' BaseOutput) or on
    a class we cannot see are left alone: gather rebuilds dict subclasses itself.
    """
    if depth > 8:
        return False
    decorated = any((ctx.resolve(d.func if isinstance(d, ast.Call) else d) or "").endswith("dataclass")
                    for d in info.node.decorator_list)
    if not decorated:
        return False
    for base in info.bases:
        local = ctx.local_name(base)
        if local is None or local not in ctx.classes or not _plain_dataclass(ctx, ctx.classes[local], depth + 1):
            return False
    return True


def optional_path(anchor: ast.AST, model: ModelClass, flags_only: bool = False) -> str | None:
    """The forward parameter whose non-default value guards ``anchor``, or None: the body of
    `if image_grid_hw is not None:` / `if flag:` with a None or False default, the `else:` of
    `if use_itm_head:` with a True default, the body of `if not return_dict:` where return_dict
    defaults to True or to None resolved from a config flag that is on by default; the body of
    `if labels is not None and next_label is not None:` (an `and`/`or` of such tests whose
    value when the caller leaves the options out is known, see ``_test_by_default``).

    Such a path runs only behind an option, so the output rules report it as a warning. With
    ``flags_only``, only boolean switches count (a True/False default, or a config flag): a value
    computed under `if labels is not None:` is what training computes, since training passes labels.
    """
    forward = model.forward
    if forward is None:
        return None
    defaults = parameter_defaults(forward.node.args)
    for test, taken in _tests_above(anchor, forward):
        by_default = _test_by_default(test, defaults, forward, flags_only)
        # The branch runs by default when the test takes it in the options' default state.
        if by_default is not None and taken != by_default[0]:
            return by_default[1]
    return None


def _test_by_default(test: ast.AST, defaults: dict, forward: FunctionInfo,
                     flags_only: bool) -> tuple[bool, str] | None:
    """The value of an `if` test when the caller leaves forward's options out, with an option it
    reads; None unless the test reads options only: `x is not None` or a bare `x` (given / on),
    `not <test>`, and `and`/`or` of such tests (every part known)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _test_by_default(test.operand, defaults, forward, flags_only)
        return None if inner is None else (not inner[0], inner[1])
    if isinstance(test, ast.BoolOp):
        parts = [_test_by_default(value, defaults, forward, flags_only) for value in test.values]
        if any(part is None for part in parts):
            return None
        value = (all if isinstance(test.op, ast.And) else any)(part[0] for part in parts)
        # An option that decides it: the first part whose value is the whole test's.
        return value, next(name for part_value, name in parts if part_value == value)
    name = _enabled_option(test)
    on = _on_by_default(name, defaults, forward, flags_only) if name else None
    return None if on is None else (on, name)


def _on_by_default(name: str, defaults: dict, forward: FunctionInfo, flags_only: bool = False) -> bool | None:
    """Is the option ``name`` given / on when the caller leaves it out? None when unknown."""
    default = defaults.get(name)
    if not isinstance(default, ast.Constant):
        return None
    if default.value is None:
        resolved = _resolved_on(name, forward)
        return resolved if resolved or not flags_only else None
    if isinstance(default.value, bool):
        return default.value
    return None


# Flags a library's configuration turns on by default, so `flag=None` resolved from the config
# (`return_dict = return_dict if return_dict is not None else self.config.use_return_dict`)
# is on unless a caller passes False: transformers' PretrainedConfig.return_dict is True.
_CONFIG_FLAGS_ON_BY_DEFAULT = frozenset({"return_dict", "use_return_dict"})


def _resolved_on(name: str, forward: FunctionInfo) -> bool:
    """Forward rebinds a None ``name`` from a config flag that is on by default:
    `name = name if name is not None else self.config.use_return_dict`."""
    for node in forward.nodes(ast.Assign):
        if not (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name
                and isinstance(node.value, ast.IfExp)):
            continue
        fallback = node.value.orelse
        if isinstance(fallback, ast.Attribute) and fallback.attr in _CONFIG_FLAGS_ON_BY_DEFAULT:
            return True
    return False


def _enabled_option(test: ast.AST) -> str | None:
    """`x is not None` or a bare `x`: the branch taken when the option is given."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) \
            and isinstance(test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        return test.left.id
    return test.id if isinstance(test, ast.Name) else None


def error_when_passed(anchor: ast.AST, model: ModelClass) -> tuple[frozenset[str], ...]:
    """For ``anchor`` behind options of forward that default to None (`if labels is not None:`):
    the cross-file conditions (a ``Finding.requires`` tuple) that some call through a DataParallel
    wrapper of the class passes each, under which the path runs when the model is wrapped.
    Empty when it is behind no option, or behind one of another kind (a flag, a config switch)."""
    from dpcheck.analysis.guards import WRAPPER_PASSES_CONDITION, required_options

    forward = model.forward
    if forward is None:
        return ()
    defaults = parameter_defaults(forward.node.args)
    conditions: list[frozenset[str]] = []
    for test, taken in _tests_above(anchor, forward):
        by_default = _test_by_default(test, defaults, forward, False)
        if by_default is not None and taken != by_default[0]:
            options = required_options(forward, test, taken)
            if not options:
                return ()
            conditions += [frozenset({f"{WRAPPER_PASSES_CONDITION}{model.info.qualname}:{name}@{position}"})
                           for name, position in options]
    return tuple(conditions)


def optional_severity(anchor: ast.AST, model: ModelClass, leaf: ast.AST | None = None) -> Severity | None:
    """WARNING for a return, or a returned value (``leaf``) computed, behind a non-default option
    (see optional_path), else the rule's own."""
    if optional_path(anchor, model) or (leaf is not None and optional_path(leaf, model, flags_only=True)):
        return Severity.WARNING
    return None
