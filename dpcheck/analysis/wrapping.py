"""Which classes are the wrapped model: evidence from this file, settled across files.

A class is
- "wrapped" when a script wraps an instance of it (`nn.DataParallel(Net())`, `net = Net()`
  then `DataParallel(net)`, in any DataParallel form) or passes one to the functional
  `nn.parallel.data_parallel(module, ...)` (also from inside another module's forward);
- "submodule" when it is built inside another nn.Module (an attribute or a layer of it), or
  when a script passes an instance of it to the constructor of the model it wraps
  (`model = Seq2Seq(encoder, decoder)` then `DataParallel(model)`);
- "top-level" otherwise: nothing says it is wrapped, nothing uses it as a layer.

A class that parallelises a submodule of its own (`self.model = nn.DataParallel(self.model)`,
`nn.parallel.data_parallel(self.net, x)` in a method) is a harness: that submodule's class is
the wrapped model, while the harness's own code runs once, on the calling device. Every class
rule's findings in a harness carry ``wrapped:<class>`` (some scanned file wraps it too).

Each file records the classes it wraps and the classes it builds inside modules in its
``FileResult`` (``wrapped``, ``submodules``, as resolved dotted names); the project index
then settles the condition ``gathered:<class>`` (wrapped somewhere, or a submodule nowhere)
that output-rule findings of a class that is top-level in its own file carry.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import Counter
from collections.abc import Iterator
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING, NamedTuple

from dpcheck.analysis.bare_calls import may_name_class
from dpcheck.analysis.bindings import target_binds
from dpcheck.analysis.classes import WRAPPED_CONDITION
from dpcheck.analysis.dataflow import argument, keyword, parameter_defaults, passed_values
from dpcheck.analysis.mentions import capitalised, summarize_mentions
from dpcheck.analysis.names import declared_all, part_class
from dpcheck.analysis.options import wrap_switches
from dpcheck.analysis.scripts import (
    LIBRARY_ROOTS,
    builder_conditions,
    dataparallel_attributes,
    mentions_dataparallel,
    mentions_script_token,
    partial_batches,
    replaced_output,
    script_facts,
    switches_to_eval,
    target_text,
)
from dpcheck.analysis.torch_api import (
    ALTERNATE_CONSTRUCTORS,
    FORWARDLESS_CONTAINERS,
    FUNCTION_DEFS,
    SELF_RETURNING_MODULE_METHODS,
    FunctionNode,
    is_torch_nn_class,
)
from dpcheck.analysis.tree import attr_of as _attr_of
from dpcheck.analysis.tree import id_of as _id_of
from dpcheck.analysis.tree import value_of as _value_of
from dpcheck.constants import (
    DATAPARALLEL_CLASSES,
    DATAPARALLEL_FUNCTIONS,
    DISTRIBUTED_DATAPARALLEL_CLASSES,
    DISTRIBUTED_DATAPARALLEL_NAME,
    REPLICATE_FUNCTIONS,
)
from dpcheck.record import record

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext
    from dpcheck.analysis.model_class import ModelClass

WRAPPED, TOP_LEVEL, SUBMODULE = "wrapped", "top-level", "submodule"
_TYPE_TESTS = frozenset({"isinstance", "issubclass"})
# Over every name, string or call of a file, in C (map, compress) rather than a Python step per node.
_func_of = attrgetter("func")


def wrapped_classes(ctx: FileContext) -> dict[str, ast.AST | None]:
    """Resolved names of the classes this file wraps -> the `dim=` of that wrapping (or None)."""
    return ctx.fact(_find_wrapped)


def _find_wrapped(ctx: FileContext) -> dict[str, ast.AST | None]:
    return ctx.fact(_wrap_sites).classes


def unresolved_wrap_sites(ctx: FileContext) -> list[int]:
    """Lines of this file's wrap sites whose module could not be traced to a class
    (`DataParallel(build_model(cfg))`): what the project wraps is then not fully known."""
    return ctx.fact(_wrap_sites).unresolved


def handed_wrap_sites(ctx: FileContext) -> list[int]:
    """Lines of the wrap sites inside a function of a module that is no script, unresolved
    (``unresolved_wrap_sites``) or traced to a parameter (``HANDED_LEAF``: `def train(model): model =
    DataParallel(model)`, a trainer's `self.model`): what they wrap is the caller's, a file that
    imports this one or one the run left out."""
    return ctx.fact(_wrap_sites).handed


def wrapped_alone(ctx: FileContext) -> list[str]:
    """Classes this file wraps that are imported by an absolute import and built, at every wrap
    site of this file, from arguments that hold no module instance (``_holds_no_module``): where
    no file of the project defines them (a library model, torchaudio's `WaveRNN`), the wrap runs
    no scanned class's code, and what runs under DataParallel is still known."""
    return ctx.fact(_wrap_sites).alone


def wrap_candidates(ctx: FileContext) -> list[list[str]]:
    """For each wrap site that ``wrapped_classes`` does not trace to a construction but whose module
    the code shows to be one of a finite set (a builder of another file, a registry of classes
    indexed at run time): its ``instance_leaves``, which the project index settles."""
    return ctx.fact(_wrap_sites).candidates


def wrappers_of(ctx: FileContext) -> dict[str, list[str]]:
    """Classes this file wraps (``wrapped_classes``) -> the resolved name of the wrapper at each of
    its wrap sites (`torch.nn.DataParallel`, a subclass of this file or another: its own scatter or
    gather may replace the stock ones; the index reads it with ``ClassIndex.own_method``)."""
    return ctx.fact(_wrap_sites).wrappers


class _WrapSites(NamedTuple):
    """What one file's wrap sites show; each field is read by the public accessor named beside it."""
    classes: dict[str, ast.AST | None]  # wrapped classes -> their `dim=` (``wrapped_classes``)
    unresolved: list[int]  # lines of wrap sites traced to no class (``unresolved_wrap_sites``)
    # (class, wrapped class) for each class whose instances the script passes to the wrapped
    # model's constructor
    parts: frozenset[tuple[str, str]]
    candidates: list[list[str]]  # the candidate leaves of the other wrap sites (``wrap_candidates``)
    alone: list[str]  # ``wrapped_alone``
    wrappers: dict[str, list[str]]  # ``wrappers_of``
    handed: list[int]  # ``handed_wrap_sites``
    latent: dict[str, list[str]]  # ``latent_wraps``


def latent_wraps(ctx: FileContext) -> dict[str, list[str]]:
    """Classes this file wraps (``wrapped_classes``) only as built behind a switch off by default, at
    every wrap site of it here: the construction of what it wraps runs in the arm of an `if` on the
    switch or after an early exit on it, and the wrap does not (`if args.baseline: model = BaseBert...`
    then `DataParallel(model)`) -> each site's switches (``options.wrap_switches``), comma-joined. The project index settles the switches the
    file does not decide and reports what only these sites run as latent (ClassIndex.latent_wrap)."""
    return ctx.fact(_wrap_sites).latent


def _wrap_sites(ctx: FileContext) -> _WrapSites:
    found: dict[str, ast.AST | None] = {}
    switches: dict[str, list[str]] = {}  # class -> each wrap site's switches ("" where it runs by default)
    wrappers: dict[str, list[str]] = {}
    unresolved: list[int] = []
    parts: set[tuple[str, str]] = set()
    candidates: list[list[str]] = []
    alone: set[str] = set()
    not_alone: set[str] = set()
    handed: list[int] = []
    if not mentions_script_token(ctx):
        return _WrapSites(found, unresolved, frozenset(), candidates, [], wrappers, handed, {})
    facts = script_facts(ctx)
    sites = [(call, facts.source_of(call).dim) for call in facts.dp_calls]
    sites += [(call, keyword(call, "dim"))
              for call in facts.data_parallel_calls]
    for call, dim in sites:
        inner = argument(call, 0, "module")
        wrapper = ctx.resolve(call.func) or "<unresolved>"  # (read as torch's own: stock methods)
        constructions = _constructions_of(inner, call, ctx)
        for construction in constructions:
            owner = _class_built(construction, ctx)
            found.setdefault(owner, dim)
            wrappers.setdefault(owner, []).append(wrapper)
            switches.setdefault(owner, []).append(_site_switches(call, construction, ctx))
            (alone if _built_alone(construction, call, ctx) else not_alone).add(owner)
            # `model = Seq2Seq(encoder, decoder)` then `DataParallel(model)`, with `encoder = Encoder(...)`:
            # the encoder runs inside the wrapped model's forward, it is not what DataParallel wraps.
            for arg in passed_values(construction):
                parts.update((part, owner) for part in classes_of(arg, construction, ctx))
        if constructions:
            continue
        overridden = _self_method_leaves(inner, call, ctx)
        if overridden:
            candidates.append(overridden)
            continue
        # A lower-case name imported from another file may be a class (MEAL-V2's
        # `discriminatorLoss(d)`) or a builder function: recorded as wrapped all the same. The
        # project index counts only names that are classes as wrapped, and while a wrapped name
        # is no scanned class (a builder, which may return any class) it demotes nothing to advice.
        maybe = _constructions_of(inner, call, ctx, imported_calls=True)
        for construction in maybe:
            found.setdefault(_class_built(construction, ctx), dim)
            wrappers.setdefault(_class_built(construction, ctx), []).append(wrapper)
            switches.setdefault(_class_built(construction, ctx), []).append(_site_switches(call, construction, ctx))
        if maybe:
            continue
        layer = _torch_layer_alone(inner, call, ctx)
        if layer:
            alone.add(layer)  # `nn.DataParallel(nn.Linear(8, 2))`: torch's own code runs, no scanned class's
            continue
        if _forwardless_container(inner, call, ctx):
            continue  # (RCAN's `nn.DataParallel(self.loss_module)` of an nn.ModuleList: wraps nothing that runs)
        items = _inherited_items(inner, call, ctx)
        if items:
            candidates.append([items])
            continue
        scope = ctx.enclosing(call, FunctionNode)
        items = _comprehension_items(inner, call, ctx)
        if items is not None:  # `[nn.DataParallel(x) for x in [text_encoder, image_encoder]]`: each item
            traced = []
            for item in items:
                leaves = instance_leaves(item, scope, ctx, flow=True)
                traced = None if leaves is None or traced is None else traced + leaves
        else:
            traced = instance_leaves(inner, scope, ctx, flow=True)
            if traced is None:
                traced = _init_attribute_leaves(inner, call, scope, ctx)
        if traced:
            candidates.append(traced)
            if _handed_in(call, ctx) and any(leaf.startswith(HANDED_LEAF) for leaf in traced):
                handed.append(call.lineno)  # (the callers decide what runs: see ClassIndex._wrap_site_reach)
        else:
            unresolved.append(call.lineno)
            if _handed_in(call, ctx):
                handed.append(call.lineno)
    latent = {owner: sorted(set(sites)) for owner, sites in switches.items() if all(sites)}
    return _WrapSites(found, unresolved, frozenset(parts), candidates, sorted(alone - not_alone), wrappers, handed,
                      latent)


def _site_switches(call: ast.Call, construction: ast.Call, ctx: FileContext) -> str:
    """The switches off by default that the construction of what a wrap site wraps runs behind and the
    wrap does not (``options.wrap_switches``), comma-joined; "" where none. A switch around the wrap
    itself (`if args.multi_gpu: model = DataParallel(model)`) is how the program turns DataParallel
    on: with it set, the wrapped model's hazards run, so it makes nothing latent."""
    return ",".join(sorted(set(wrap_switches(construction, ctx)).difference(wrap_switches(call, ctx))))


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _comprehension_items(node: ast.AST | None, at: ast.AST, ctx: FileContext) -> list[ast.expr] | None:
    """The items of the literal list or tuple that the comprehension around ``at`` binds the name
    ``node`` to, one at a time (`[nn.DataParallel(x) for x in [text_encoder, image_encoder]]`); None
    where ``node`` is no such name (a comprehension of one loop over a literal)."""
    node = without_conversions(node)
    if not isinstance(node, ast.Name):
        return None
    parent = ctx.parent(at)
    while parent is not None and not isinstance(parent, _COMPREHENSIONS) and not isinstance(parent, FunctionNode):
        parent = ctx.parent(parent)
    if not isinstance(parent, _COMPREHENSIONS) or len(parent.generators) != 1:
        return None
    loop = parent.generators[0]
    if not (isinstance(loop.target, ast.Name) and loop.target.id == node.id
            and isinstance(loop.iter, (ast.List, ast.Tuple)) and not loop.ifs):
        return None
    return list(loop.iter.elts)


def _handed_in(call: ast.Call, ctx: FileContext) -> bool:
    """Does the wrapped module come from the caller of the code around the wrap: a wrap in a
    function of a module that is no script (a training loop's `do_train(model, ...)`, a
    trainer's `self.model = DataParallel(model)`), whose callers choose what it wraps?"""
    return ctx.enclosing(call, FunctionNode) is not None and not _is_script(ctx)


def _is_script(ctx: FileContext) -> bool:
    """Does the module run on its own: a `__main__` test, or top-level code that does work (a call,
    a loop, a `with`), as dcgan's `main.py` does?"""
    return "__main__" in ctx.source.text or any(
        isinstance(node, (ast.For, ast.While, ast.With)) or isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
        for node in ctx.tree.body)


def _built_alone(construction: ast.Call, at: ast.AST, ctx: FileContext) -> bool:
    """Is ``construction`` a class imported by an absolute import (not one of this file, not a
    relative import of a sibling file) called with arguments that hold no module instance?"""
    func = construction.func
    if isinstance(func, ast.Attribute) and func.attr in ALTERNATE_CONSTRUCTORS:
        return False  # (`from_pretrained`: which class it builds is the checkpoint's to say)
    head = _attribute_head(func)
    if not isinstance(head, ast.Name) or head.id not in ctx.imports.aliases or head.id in ctx.fact(_imported_twice) \
            or head.id in ctx.fact(_relatively_imported):
        return False
    scope = ctx.enclosing(at, FunctionNode)
    return all(_holds_no_module(arg, scope, ctx) for arg in passed_values(construction))


def _torch_layer_alone(inner: ast.AST | None, at: ast.AST, ctx: FileContext) -> str | None:
    """The torch layer the wrapped module is, when it is built in place (`nn.Linear(8, 2)`) from
    arguments that hold no module instance; else None."""
    inner = without_conversions(inner)
    if not isinstance(inner, ast.Call):
        return None
    name = ctx.resolve(inner.func) or ""
    scope = ctx.enclosing(at, FunctionNode)
    return name if is_torch_nn_class(name) and all(
        _holds_no_module(arg, scope, ctx) for arg in passed_values(inner)) else None


def _forwardless_container(inner: ast.AST | None, at: ast.AST, ctx: FileContext) -> bool:
    """Is the wrapped module a torch container with no forward (`nn.ModuleList()`, `nn.ModuleDict()`),
    built in place or bound to a name or `self.x` only by such constructions in its scope? Calling its
    DataParallel wrapper raises, so no module in it runs on replicas: the wrap site wraps nothing."""
    inner = without_conversions(inner)
    if isinstance(inner, ast.Call):
        name = ctx.resolve(inner.func) or ""
        return is_torch_nn_class(name) and name.rsplit(".", 1)[-1] in FORWARDLESS_CONTAINERS
    text = target_text(inner)
    if text is None:
        return False
    facts = script_facts(ctx)
    attribute = text.startswith("self.")
    scope = facts.scope_of(at, attribute=attribute)
    values = [sub.value for sub in (ctx.tree_index.nodes_within(scope, ast.Assign) if scope is not ctx.tree
                                    else ctx.nodes(ast.Assign))
              if any(target_text(t) == text for t in sub.targets) and facts.scope_of(sub, attribute=attribute) is scope]
    # (the wrap itself rebinds the name: `self.loss_module = nn.DataParallel(self.loss_module)`)
    values = [value for value in values if facts.dp_class(without_conversions(value)) is None]
    return bool(values) and all(isinstance(without_conversions(value), ast.Call)
                                and _forwardless_container(value, at, ctx) for value in values)


def _relatively_imported(ctx: FileContext) -> frozenset[str]:
    """Names a relative import binds (`from .models import Net`: a sibling file, maybe not scanned)."""
    statements = ctx.tree_index.statements_by_type()
    return frozenset(alias.asname or alias.name for node in statements.get(ast.ImportFrom, ())
                     if node.level for alias in node.names)


def _holds_no_module(node: ast.AST, scope: ast.AST | None, ctx: FileContext, depth: int = 0) -> bool:
    """Can this argument not be, nor hold, a module instance of the project? Constants, arithmetic,
    comparisons, containers and f-strings of such, attributes of a name other than `self`
    (`args.n_hidden`: options and configs), calls of torch or builtins on such, and a name whose
    every binding in ``scope`` is such. A bare parameter, `self.x`, a call of anything else, a
    lambda or a name bound otherwise may be one."""
    if depth > _LEAF_DEPTH:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Attribute):
        head = _attribute_head(node)
        return isinstance(head, ast.Name) and head.id != "self" or isinstance(head, ast.Constant)
    if isinstance(node, ast.Name):
        leaves = _name_leaves(node.id, scope, ctx,
                              lambda value, at: [] if _holds_no_module(value, at, ctx, depth + 1) else None)
        return leaves is not None
    if isinstance(node, ast.Call):
        name = ctx.resolve(node.func) or ""
        if not (name.startswith("torch.") and not is_torch_nn_class(name) or isinstance(node.func, ast.Name)
                and node.func.id in _BUILTIN_NAMES and name in ("", node.func.id)):
            return False
        return all(_holds_no_module(arg, scope, ctx, depth + 1)
                   for arg in passed_values(node))
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Tuple, ast.List,
                         ast.Set, ast.Dict, ast.JoinedStr, ast.FormattedValue, ast.Subscript, ast.Starred)):
        return all(_holds_no_module(child, scope, ctx, depth + 1) for child in ast.iter_child_nodes(node)
                   if isinstance(child, ast.expr))
    return False


def classes_of(node: ast.AST | None, at: ast.AST, ctx: FileContext, imported_calls: bool = False) -> list[str]:
    """Classes an expression may be an instance of (see ``_constructions_of``; with ``imported_calls``,
    also the names of the imported callables it may come from, a lower-case class among them)."""
    return [_class_built(call, ctx) for call in _constructions_of(node, at, ctx, imported_calls=imported_calls)]


def _class_built(construction: ast.Call, ctx: FileContext) -> str:
    func = construction.func
    if isinstance(func, ast.Attribute) and func.attr in ALTERNATE_CONSTRUCTORS:
        func = func.value  # `BertForQA.from_pretrained(...)` builds a BertForQA
    return ctx.resolve(func) or ""


def _constructions_of(node: ast.AST | None, at: ast.AST, ctx: FileContext, depth: int = 0,
                      imported_calls: bool = False) -> list[ast.Call]:
    """The class constructions an expression may be an instance of: a construction, or a name or
    `self.x` built from one in the same scope (through `.cuda()`/`.to()` chains and conditional
    expressions). With ``imported_calls``, a call of any name imported from outside torch counts
    too (a lower-case class of another file cannot be told from a function here)."""
    if node is None or depth > 4:
        return []
    node = without_conversions(node)
    if isinstance(node, ast.IfExp):
        return _constructions_of(node.body, at, ctx, depth + 1, imported_calls) + \
            _constructions_of(node.orelse, at, ctx, depth + 1, imported_calls)
    if isinstance(node, ast.Call):
        if _IMPORT_BY_NAME_TEXT in ctx.source.text and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) \
                and _package_loaded_by_name(node.func.value.id, ctx.enclosing(node, FunctionNode), ctx):
            return []  # (`module.Net(...)` of a module loaded by a computed name: instance_leaves reads it)
        name = _class_built(node, ctx)
        local = ctx.local_name(name)
        if _reads_as_class(name, ctx):
            return [node]  # (a class of this file whatever its case: CMC's `alexnet(feat_dim)`)
        if imported_calls and isinstance(node.func, (ast.Name, ast.Attribute)) and local is None \
                and "." in name and not name.startswith("torch."):
            return [node]
        builder = ctx.module_functions.get(local) if local else None
        if not isinstance(builder, ast.FunctionDef):
            return []
        # A builder function of this file (`def resnet50(**kw): model = ResNet(...); return model`):
        # what its returns are instances of.
        found = []
        for ret in ctx.tree_index.nodes_within(builder, ast.Return):
            if ret.value is not None and ctx.enclosing(ret, FunctionNode) is builder:
                found += _constructions_of(ret.value, ret, ctx, depth + 1, imported_calls)
        return found
    facts = script_facts(ctx)
    if isinstance(node, ast.Subscript):
        return _items_constructions(node, at, ctx, depth, imported_calls)
    text = target_text(node)
    if text is None:
        return []
    attribute = text.startswith("self.")
    scope = facts.scope_of(at, attribute=attribute)
    found: list[ast.Call] = []
    for sub in ctx.tree_index.nodes_within(scope, ast.Assign) if scope is not ctx.tree else ctx.nodes(ast.Assign):
        if any(target_text(t) == text for t in sub.targets) \
                and facts.scope_of(sub, attribute=attribute) is scope:
            wrap = without_conversions(sub.value)
            if (facts.dp_class(wrap) is not None or isinstance(wrap, ast.Call) and _wrapper_class(
                    ctx.resolve(wrap.func) or "")) and target_text(without_conversions(argument(wrap, 0, "module"))) == text:
                continue  # (`self.model = DataParallelModel(self.model)`, `model = DDP(model)`: the wrapper, not the model)
            found += _constructions_of(sub.value, sub, ctx, depth + 1, imported_calls)
    return found


# Methods that put an item into a list or a dict: (the method, the position of the item among its arguments).
_ITEM_ADDING_METHODS = {"append": 0, "insert": 1}


def _items_constructions(node: ast.Subscript, at: ast.AST, ctx: FileContext, depth: int,
                         imported_calls: bool) -> list[ast.Call]:
    """The constructions an item of a list or dict (`models[k]`, `self.nets[i]`) may be, as
    ``_constructions_of`` finds them for a name: what the same scope puts into that container, in
    a list or dict display (or comprehension) bound to it, an item assignment (`models[k] =
    Net()`) or `.append`/`.insert`. (`self.nets[i] = DataParallel(self.nets[i])` puts the wrapper.)"""
    facts = script_facts(ctx)
    text = target_text(node.value)
    if text is None:
        return []
    attribute = text.startswith("self.")
    scope = facts.scope_of(at, attribute=attribute)
    within = ctx.tree_index.nodes_within if scope is not ctx.tree else None
    items: list[tuple[ast.AST, ast.AST]] = []  # (an item put in, where)
    for sub in within(scope, ast.Assign) if within else ctx.nodes(ast.Assign):
        if facts.scope_of(sub, attribute=attribute) is not scope:
            continue
        value = sub.value
        for target in sub.targets:
            if target_text(target) == text:
                if isinstance(value, ast.Dict):
                    items += [(v, sub) for v in value.values]
                elif isinstance(value, (ast.List, ast.Tuple)):
                    items += [(v, sub) for v in value.elts]
                elif isinstance(value, (ast.ListComp, ast.DictComp)):
                    items.append((value.elt if isinstance(value, ast.ListComp) else value.value, sub))
            elif isinstance(target, ast.Subscript) and target_text(target.value) == text:
                wrap = without_conversions(value)
                inner = argument(wrap, 0, "module") if facts.dp_class(wrap) is not None else None
                if not (isinstance(inner, ast.Subscript) and target_text(inner.value) == text):
                    items.append((value, sub))
    for call in within(scope, ast.Call) if within else ctx.nodes(ast.Call):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _ITEM_ADDING_METHODS and target_text(func.value) == text \
                and len(call.args) > _ITEM_ADDING_METHODS[func.attr] and facts.scope_of(call, attribute=attribute) is scope:
            items.append((call.args[_ITEM_ADDING_METHODS[func.attr]], call))
    found: list[ast.Call] = []
    for item, where in items:
        found += _constructions_of(item, where, ctx, depth + 1, imported_calls)
    return found


def _inherited_items(inner: ast.AST | None, at: ast.AST, ctx: FileContext) -> str | None:
    """``ITEMS_LEAF`` for a wrap of an item of a container on self under a computed key
    (`nn.DataParallel(self.model[name])` in a loop over `self.model`) in a method of a class of this
    file whose own code puts no traced module into it: the items its subclasses put there (in other
    files: digideep's `PolicyBase.model_to_gpu` wraps what each algorithm's `Policy` stores in
    `self.model["dist"]`), which the project index settles from ``item_stores``. None for any other
    wrapped expression, and for a constant key (`self.models["pose"]` wraps that one item only)."""
    inner = without_conversions(inner)
    if not isinstance(inner, ast.Subscript) or isinstance(inner.slice, ast.Constant):
        return None
    container = target_text(inner.value)
    if container is None or not container.startswith("self.") or container.count(".") != 1:
        return None
    method = ctx.enclosing(at, FunctionNode)
    owner = ctx.enclosing(method, ast.ClassDef) if method is not None else None
    info = ctx.classes.get(owner.name) if owner is not None else None
    if info is None or info.node is not owner or ctx.enclosing(owner, FunctionNode) is not None:
        return None
    return f"{ITEMS_LEAF}{inner.value.attr}@{info.qualname}"


def item_stores(ctx: FileContext) -> dict[str, list[str]]:
    """`<attr>@<class>` -> what the methods of a class of this file put into `self.<attr>` item by item
    (`self.model["dist"] = Categorical(...)`, `self.nets.append(Net())`), as ``instance_leaves``, for
    classes with a base of another module that is not torch's: that base may wrap every item
    (``_inherited_items``). A value not traced adds ``UNTRACED_ITEM`` and the classes it may be built from
    (``classes_of``); a store of a wrapper of the same container's item adds nothing."""
    found: dict[str, set[str]] = {}
    if not _PUTS_ITEM_ON_SELF.search(ctx.source.text):
        return {}
    for info in ctx.classes.values():
        if not any(ctx.local_name(base) is None and not base.startswith(("torch.", "builtins."))
                   and base not in _BUILTIN_NAMES for base in info.bases):
            continue
        for method in info.methods.values():
            for node, container, value in _item_puts(method, ctx):
                text = target_text(container)
                if text is None or not text.startswith("self.") or text.count(".") != 1:
                    continue
                wrapped = argument(value, 0, "module") if isinstance(value, ast.Call) else None
                if isinstance(wrapped, ast.Subscript) and target_text(wrapped.value) == text:
                    continue  # (`self.model[k] = nn.DataParallel(self.model[k])`: the wrapper of an item)
                leaves = instance_leaves(value, method, ctx)
                stored = found.setdefault(f"{container.attr}@{info.qualname}", set())
                stored.update(leaves if leaves is not None else [UNTRACED_ITEM, *classes_of(value, node, ctx)])
    return {key: sorted(leaves) for key, leaves in sorted(found.items())}


# The text of an item put into a container on self (`self.model["dist"] = `, `self.nets.append(`): the
# only files ``item_stores`` walks.
_PUTS_ITEM_ON_SELF = re.compile(r"self\.\w+(?:\[[^\]\n]*\]\s*=[^=]|\.(?:append|insert)\()")


def _item_puts(method: ast.AST, ctx: FileContext) -> Iterator[tuple[ast.AST, ast.AST, ast.AST]]:
    """(where, the container, the item) for each item a function puts into a container: an item
    assignment (`c[k] = v`) or `c.append(v)` / `c.insert(i, v)`."""
    for node in ctx.tree_index.nodes_within(method, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript):
                yield node, target.value, node.value
    for call in ctx.tree_index.nodes_within(method, ast.Call):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _ITEM_ADDING_METHODS \
                and len(call.args) > _ITEM_ADDING_METHODS[func.attr]:
            yield call, func.value, call.args[_ITEM_ADDING_METHODS[func.attr]]


# A leaf of ``instance_leaves`` that the project index settles: a call of another module's function.
CALL_LEAF = "call:"
# After a function's name in a ``CALL_LEAF`` and a ``function_returns`` key: a call of what the function
# returns, a class (`get_backbone_class(name)()`), not of the function.
CALLED_RETURN = "()"
# A leaf of ``wrap_candidates`` that the project index settles: the items that a class, or a subclass of
# it in any scanned file, puts into a container on self (``_inherited_items``): `items:<attr>@<class>`.
ITEMS_LEAF = "items:"
# Among the leaves of an ``item_stores`` entry: an item whose value was not traced.
UNTRACED_ITEM = "?"
# A leaf of ``instance_leaves`` built as a part of the instance (handed to its class's constructor),
# not the instance itself: its class runs inside the model, and need not be a scanned class.
PART_LEAF = "part:"
# How deep ``instance_leaves`` follows names, builders and registries within one file.
_LEAF_DEPTH = 8
# A leaf of a parameter of a module-level function or of a module-level class's `__init__` whose
# callers are in other files (or call it in ways this file cannot follow): what every scanned call
# passes for it, which the project index settles from each file's ``handed.handed_calls``:
# `handed:<callee>@<parameter>#<position>` (position `-` for a keyword-only parameter), then `=None`
# where the parameter defaults to None (a call that leaves it out passes no module).
HANDED_LEAF = "handed:"
# A leaf of a call of a function or class that a module loaded by a computed name in a package defines
# (RCAN's `module = import_module('model.' + args.model.lower())`, then `module.make_model(args)`):
# `modules:<package>.<name>`, what that name of every scanned module of the package builds, which the
# project index settles.
MODULES_LEAF = "modules:"
# A leaf of ``wrap_candidates`` that the project index settles: what a method that a wrap site's class
# calls on self returns, the class's own and every scanned subclass's override of it (``method_returns``):
# `override:<module>.<Class>.<method>`.
OVERRIDE_LEAF = "override:"
# The function that loads a module by its dotted name, and what its name is spelt with.
_IMPORT_BY_NAME = "importlib.import_module"
_IMPORT_BY_NAME_TEXT = "import_module"


def without_conversions(node: ast.AST | None) -> ast.AST | None:
    """``node`` without trailing `.cuda()`/`.to(...)`/`.eval()` calls."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in SELF_RETURNING_MODULE_METHODS:
        node = node.func.value
    return node


def _reads_as_class(name: str, ctx: FileContext) -> bool:
    """Does a call of the resolved ``name`` read as the construction of a class (not torch's)? A
    class of this file does whatever its case (CMC's `alexnet(feat_dim)`)."""
    return (name.rsplit(".", 1)[-1][:1].isupper() or ctx.local_name(name) in ctx.classes) \
        and not name.startswith("torch.")


def instance_leaves(node: ast.AST | None, scope: ast.AST | None, ctx: FileContext, depth: int = 0,
                    flow: bool = False) -> list[str] | None:
    """What an expression may be an instance of, strictly: the resolved names of the classes it
    may be built from, ``PART_LEAF`` + those of the classes built as its parts (arguments of those
    constructions), and ``CALL_LEAF`` + the resolved name of each function of another module whose
    return it may be (after ``PART_LEAF`` for a part); None when any part of it is not traced (a parameter, a library or `torch` call,
    `getattr(models, name)()`, `models.__dict__[name]()`, `self.x`): then it may be any class.

    Followed: conversions (`.cuda()`), both arms of a conditional expression, names of the
    enclosing scope (every binding of the name must be an assignment), builder functions of this
    file (every return), and registries: a module-level dict of classes (or of tuples of classes)
    indexed at run time, `MODELS[name](...)` or `config_class, model_class = MODEL_CLASSES[key]`
    then `model_class.from_pretrained(...)`, whose candidates are every class at that position."""
    if node is None or depth > _LEAF_DEPTH:
        return None
    node = without_conversions(node)
    if isinstance(node, ast.Constant) and node.value is None:
        return []  # (`model = None` before the branches that build it)
    if isinstance(node, ast.IfExp):
        body = instance_leaves(node.body, scope, ctx, depth + 1, flow)
        orelse = instance_leaves(node.orelse, scope, ctx, depth + 1, flow)
        return None if body is None or orelse is None else body + orelse
    if isinstance(node, ast.Name):
        return _name_leaves(node.id, scope, ctx, lambda value, at: instance_leaves(value, at, ctx, depth + 1, flow),
                            flow=flow and depth < _LEAF_DEPTH)
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    # `Model.from_pretrained(path, config=config)` builds its parts from files and a config.
    construction: ast.Call | None = node
    if isinstance(func, ast.Attribute) and func.attr in ALTERNATE_CONSTRUCTORS:
        func, construction = func.value, None
    if isinstance(func, ast.Subscript):  # `MODELS[name](...)`
        return _with_parts(_registry_leaves(func, None, ctx), construction, scope, ctx, depth)
    if isinstance(func, ast.Call):  # `get_backbone_class(name)(...)`: the class a getter returns
        return _with_parts(_returned_class_leaves(func, ctx, depth), construction, scope, ctx, depth)
    if isinstance(func, ast.Name) and func.id in ctx.fact(_imported_twice):
        # `from models.resnet_cifar import resnet18` in one branch, `resnet_stl`'s in another: either.
        targets = ctx.fact(_imported_twice)[func.id]
        if targets is None:
            return None
        found: list[str] = []
        for target in targets:
            leaves = _with_parts([target], construction, scope, ctx, depth) if _reads_as_class(target, ctx) \
                else [CALL_LEAF + target]
            if leaves is None:
                return None
            found += leaves
        return found
    name = ctx.resolve(func) or ""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and _parsed_arguments(func.value.id, scope, ctx):
        return []  # (`args = parser.parse_args()`: a namespace of options, no module)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        package = _package_loaded_by_name(func.value.id, scope, ctx)
        if package:
            return _with_parts([f"{MODULES_LEAF}{package}.{func.attr}"], construction, scope, ctx, depth)
    if isinstance(func, ast.Name) and not _reads_as_class(name, ctx) and func.id not in ctx.module_functions \
            and (not name or ctx.local_name(name) is not None):
        # `model_class(...)`, `model_class.from_pretrained(...)`: a class taken from a registry.
        classes = _name_leaves(func.id, scope, ctx, lambda value, at: _class_named(value, ctx))
        return _with_parts(classes, construction, scope, ctx, depth)
    if not name or name.startswith(("torch.", "builtins.")) or name in _BUILTIN_NAMES:
        return None  # (`getattr(models, arch)()` too)
    local = ctx.local_name(name)
    if _reads_as_class(name, ctx):
        return _with_parts([name], construction, scope, ctx, depth)
    if local is None or "." in local:  # (another module's, a submodule's of a package `__init__`)
        return [CALL_LEAF + name]
    builder = ctx.module_functions.get(local)
    return _returns_of(builder, ctx, depth + 1) if isinstance(builder, ast.FunctionDef) else None


def _parsed_arguments(name: str, scope: ast.AST | None, ctx: FileContext) -> bool:
    """Is every binding of ``name`` in ``scope`` a call of `argparse` (`parser = argparse.ArgumentParser()`):
    a parser, whose methods return options (`parser.parse_args()`), never a module of the project?"""
    return _name_leaves(name, scope, ctx, lambda value, at: [] if isinstance(value, ast.Call) and (
        ctx.resolve(value.func) or "").startswith(_ARGUMENT_PARSERS) else None) == []


def _package_loaded_by_name(name: str, scope: ast.AST | None, ctx: FileContext) -> str | None:
    """The package every binding of ``name`` in ``scope`` loads a module of by a computed name
    (`import_module('model.' + name)`, `import_module(f"model.{name}")`, `"model.{}".format(name)`,
    `"model.%s" % name`), or None."""
    packages: set[str] = set()

    def loaded(value: ast.AST, at: ast.AST | None) -> list[str] | None:
        if not (isinstance(value, ast.Call) and value.args and ctx.resolve(value.func) == _IMPORT_BY_NAME):
            return None
        dotted = value.args[0]
        if isinstance(dotted, ast.BinOp) and isinstance(dotted.op, (ast.Add, ast.Mod)):
            head = dotted.left
        elif isinstance(dotted, ast.JoinedStr) and dotted.values:
            head = dotted.values[0]
        elif isinstance(dotted, ast.Call) and isinstance(dotted.func, ast.Attribute) and dotted.func.attr == "format":
            head = dotted.func.value
        else:
            return None
        prefix = head.value if isinstance(head, ast.Constant) and isinstance(head.value, str) else ""
        prefix = prefix.partition("{")[0].partition("%")[0]
        if not prefix.endswith(".") or prefix.startswith("."):
            return None
        packages.add(prefix[:-1])
        return []

    found = _name_leaves(name, scope, ctx, loaded)
    return packages.pop() if found == [] and len(packages) == 1 else None


# What a command-line parser is built by.
_ARGUMENT_PARSERS = "argparse."


def _with_parts(classes: list[str] | None, construction: ast.Call | None, scope: ast.AST | None, ctx: FileContext,
                depth: int) -> list[str] | None:
    """``classes`` (those ``construction`` may build) and the part leaves of its arguments."""
    if classes is None or construction is None:
        return classes
    found = list(classes)
    for arg in passed_values(construction):
        parts = _part_leaves(arg, scope, ctx, depth + 1)
        if parts is None:
            return None
        found += [leaf if leaf.startswith(PART_LEAF) else PART_LEAF + leaf for leaf in parts]
    return found


def _imported_twice(ctx: FileContext) -> dict[str, list[str] | None]:
    """Names that more than one import statement of the file binds (in different functions or
    branches) -> every target they are bound to (None when one is a relative import or a module):
    which one such a name is at a call is not known from the name alone."""
    statements = ctx.tree_index.statements_by_type()
    bindings: dict[str, list[str | None]] = {}
    for node in [*statements.get(ast.Import, ()), *statements.get(ast.ImportFrom, ())]:
        for alias in node.names:
            absolute = isinstance(node, ast.ImportFrom) and not node.level and node.module
            bindings.setdefault(alias.asname or alias.name.partition(".")[0], []).append(
                f"{node.module}.{alias.name}" if absolute else None)
    return {name: None if None in found else found for name, found in bindings.items() if len(found) > 1}


def _part_leaves(node: ast.AST, scope: ast.AST | None, ctx: FileContext, depth: int) -> list[str] | None:
    """The leaves of an argument of a construction (a part of the model built: an encoder handed
    to a Seq2Seq): a call or a name bound to one is followed like the module itself (None when not
    traced); calls of torch and the other libraries (`json.load(f)`, `np.load(path)`: LIBRARY_ROOTS),
    builtins (`bool(...)`) and methods of values (`cfg.get("dim")`) build no part of the project, and
    anything else (a number, `cfg.dim`, a parameter) is no part."""
    node = without_conversions(node)
    if isinstance(node, ast.Name):
        return _name_leaves(node.id, scope, ctx, lambda value, at: _part_leaves(value, at, ctx, depth + 1), unbound=[])
    if not isinstance(node, ast.Call):
        return []
    func = node.func
    name = ctx.resolve(func) or ""
    if name.startswith(LIBRARY_ROOTS) and name not in _PARTIAL_FUNCTIONS or isinstance(func, ast.Name) \
            and func.id in _BUILTIN_NAMES and (not name or name == func.id or func.id not in ctx.imports.aliases
                                               and func.id not in ctx.module_functions and func.id not in ctx.classes) \
            or isinstance(func, ast.Attribute) and not name:
        return []
    if name in _PARTIAL_FUNCTIONS and node.args:
        # `norm_layer=partial(nn.LayerNorm, eps=1e-6)`: the constructor may build what the callable
        # builds (torch's layer: nothing of the project), with the other arguments as parts.
        built = without_conversions(node.args[0])
        leaves = [] if (ctx.resolve(built) or "").startswith("torch.") else _callable_leaves(built, ctx)
        for arg in [*node.args[1:], *(k.value for k in node.keywords)]:
            if leaves is not None:
                more = _part_leaves(arg, scope, ctx, depth + 1)
                leaves = None if more is None else leaves + more
        return leaves
    local = ctx.local_name(name)
    builder = ctx.module_functions.get(local) if isinstance(func, ast.Name) and local else None
    if isinstance(builder, ast.FunctionDef) and not _reads_as_class(name, ctx):
        # (a function of this file whose returns build no class, `args = parse_args()`, hands no part)
        found = []
        for stmt in _scope_statements(builder.body):
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                leaves = instance_leaves(stmt.value, builder, ctx, depth + 1)
                if leaves is None:
                    return None
                found += leaves
        return found
    return instance_leaves(node, scope, ctx, depth)


# `functools.partial`: a callable that builds what its first argument builds.
_PARTIAL_FUNCTIONS = frozenset({"functools.partial"})


def _returns_of(fn: ast.FunctionDef, ctx: FileContext, depth: int) -> list[str] | None:
    """The leaves of every return of a function (None when one is not traced, or none returns a value).
    Once per function and depth in a file: a model library's registered builders all return the
    same few private builders (timm's `resnet50` -> `_create_resnet`), traced again for each."""
    traced = ctx.fact(_traced_returns)
    key = (fn, depth)
    if key not in traced:
        traced[key] = _trace_returns(fn, ctx, depth)
    found = traced[key]
    return None if found is None else list(found)


def _traced_returns(ctx: FileContext) -> dict[tuple[ast.FunctionDef, int], tuple[str, ...] | None]:
    """The memo of ``_returns_of``: (function, depth) -> its leaves."""
    return {}


def _trace_returns(fn: ast.FunctionDef, ctx: FileContext, depth: int) -> tuple[str, ...] | None:
    found: list[str] = []
    returned = False
    for stmt in _scope_statements(fn.body):
        if isinstance(stmt, ast.Return):
            leaves = instance_leaves(stmt.value, fn, ctx, depth) if stmt.value is not None else []
            if leaves is None:
                return None
            returned = returned or bool(leaves)
            found += leaves
    return tuple(found) if returned else None


def _scope_statements(body: list[ast.stmt]):
    """The statements of one scope, nested blocks included, nested functions and classes not."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field_name in ("body", "orelse", "finalbody"):
            yield from _scope_statements(getattr(stmt, field_name, ()))
        for handler in getattr(stmt, "handlers", ()):
            yield from _scope_statements(handler.body)
        for case in getattr(stmt, "cases", ()):
            yield from _scope_statements(case.body)


def _name_leaves(name: str, scope: ast.AST | None, ctx: FileContext, follow, unbound=None,
                 flow: bool = False) -> list[str] | None:
    """The leaves of a name in ``scope`` (a function, or None: the module): ``follow(value, scope)``
    of each assignment of it, or the registry leaves of a tuple assignment from a registry; None
    when anything else binds it (a loop, `with ... as`, an import, a definition), or when nothing
    does (then ``unbound``). A parameter is ``unbound``, or with ``flow`` (a wrap site's own file:
    `def train(args, model): model = DataParallel(model)`) what this file's calls of its function pass."""
    found: list[str] = []
    bound = False
    if scope is not None:
        arguments = scope.args
        if any(a.arg == name for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                       *filter(None, (arguments.vararg, arguments.kwarg))]):
            if not flow:
                return unbound
            if isinstance(scope, ast.Lambda):
                return None  # (a lambda's callers are not followed)
            passed = _passed_leaves(scope, name, ctx, follow)
            if passed is None:
                passed = _handed_leaves(scope, name, ctx)
            if passed is None:
                return None
            found, bound = passed, True
    if isinstance(scope, ast.Lambda):
        return None  # (a name a lambda does not bind is its enclosing scope's)
    for stmt in _scope_statements(scope.body if scope is not None else ctx.tree.body):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name) and target.id == name and _wraps_name(stmt.value, name, ctx):
                    continue  # (`model = nn.DataParallel(model)`: the same instance, wrapped)
                if isinstance(target, ast.Name) and target.id == name:
                    leaves = follow(stmt.value, scope) if not isinstance(stmt.value, ast.Subscript) \
                        else _registry_leaves(stmt.value, None, ctx)
                elif isinstance(target, (ast.Tuple, ast.List)) and any(
                        isinstance(e, ast.Name) and e.id == name for e in target.elts):
                    position = next(i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == name)
                    if _returns_its_arguments(stmt.value, name, position, ctx) \
                            or _item_rewrapped(stmt.value, name, position, ctx):
                        continue  # (`model, optimizer = amp.initialize(model, optimizer)`: the same instance)
                    leaves = _registry_leaves(stmt.value, position, ctx) if isinstance(stmt.value, ast.Subscript) \
                        else None
                elif target_binds(target, name):
                    leaves = None
                else:
                    continue
                if leaves is None:
                    return None
                bound = True
                found += leaves
        elif _binds_otherwise(stmt, name):
            return None
    return found if bound else unbound


# Functions that return the modules (and optimizers) they are passed, in the order passed.
_RETURNS_ITS_ARGUMENTS = ("amp.initialize",)


def _returns_its_arguments(value: ast.AST, name: str, position: int, ctx: FileContext) -> bool:
    """Is ``value`` apex's `amp.initialize(model, optimizer)` passed ``name`` at ``position``?"""
    return isinstance(value, ast.Call) and (ctx.resolve(value.func) or "").endswith(_RETURNS_ITS_ARGUMENTS) \
        and position < len(value.args) and isinstance(value.args[position], ast.Name) \
        and value.args[position].id == name


def _returned_class_leaves(call: ast.Call, ctx: FileContext, depth: int) -> list[str] | None:
    """What calling the value ``call`` returns builds, where the callee returns a class (or a
    builder) of a registry: for a function of another module ``CALL_LEAF`` + its name +
    ``CALLED_RETURN``, which the project index settles; for one of this file, ``_class_returns``."""
    name = ctx.resolve(call.func) or ""
    if not name or name.startswith(("torch.", "builtins.")) or name in _BUILTIN_NAMES:
        return None
    local = ctx.local_name(name)
    if local is None or "." in local:  # (another module's, a submodule's of a package `__init__`)
        return [CALL_LEAF + name + CALLED_RETURN]
    getter = ctx.module_functions.get(local)
    return _class_returns(getter, ctx) if isinstance(getter, ast.FunctionDef) and depth < _LEAF_DEPTH else None


def _class_returns(fn: ast.FunctionDef, ctx: FileContext) -> list[str] | None:
    """What calling the value of every return of ``fn`` builds, where each returns a class or a builder
    function by name or from a registry (`return _backbone_class_map[key]`, `return {"unet": UNet,
    ...}[name]`): its leaves (``_registry_leaves``); None where one returns anything else."""
    found: list[str] = []
    for stmt in _scope_statements(fn.body):
        if not isinstance(stmt, ast.Return) or stmt.value is None:
            continue
        value = stmt.value
        leaves = _registry_leaves(value, None, ctx) if isinstance(value, ast.Subscript) \
            else _callable_leaves(value, ctx) if isinstance(value, (ast.Name, ast.Attribute)) else None
        if leaves is None:
            return None
        found += leaves
    return found or None


def _callable_leaves(value: ast.AST, ctx: FileContext) -> list[str] | None:
    """[what calling ``value`` builds] where it names a class ([the class]) or a function of the
    project (``CALL_LEAF`` + its name, which the project index settles); None otherwise (a name bound
    in a scope, torch's or a builtin)."""
    name = _unambiguous_name(value, ctx)
    if not name or name.startswith(("torch.", "builtins.")) or name in _BUILTIN_NAMES:
        return None
    if _reads_as_class(name, ctx):
        return [name]
    local = ctx.local_name(name)
    # (a package's `__init__` names its submodules' functions under its own prefix: `models.vit.vit_tiny`)
    return [CALL_LEAF + name] if local is None or local in ctx.module_functions or "." in local else None


def _item_rewrapped(value: ast.AST, name: str, position: int, ctx: FileContext) -> bool:
    """Is ``value`` a list comprehension over a literal that holds ``name`` at ``position`` and makes
    each item the item itself, converted or wrapped (`a, b = [x.to(device) for x in [a, b]]`)?"""
    if not isinstance(value, ast.ListComp) or len(value.generators) != 1:
        return False
    loop = value.generators[0]
    return isinstance(loop.target, ast.Name) and isinstance(loop.iter, (ast.List, ast.Tuple)) and not loop.ifs \
        and position < len(loop.iter.elts) and isinstance(loop.iter.elts[position], ast.Name) \
        and loop.iter.elts[position].id == name and _wraps_name(value.elt, loop.target.id, ctx)


def _class_named(value: ast.AST, ctx: FileContext) -> list[str] | None:
    """[the class] a name is bound to directly (`model_class = BertForQA`), or None."""
    name = _unambiguous_name(value, ctx)
    return [name] if name and _reads_as_class(name, ctx) else None


def _unambiguous_name(value: ast.AST, ctx: FileContext) -> str | None:
    """The resolved name of a name or dotted attribute whose first name one import binds, or None."""
    head = _attribute_head(value)
    if not isinstance(head, ast.Name) or head.id in ctx.fact(_imported_twice):
        return None
    return ctx.resolve(value)


def _attribute_head(node: ast.AST) -> ast.AST:
    """What a dotted attribute starts from: `args` for `args.model.depth`; ``node`` when it is none."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _passed_leaves(fn: ast.FunctionDef, name: str, ctx: FileContext, follow) -> list[str] | None:
    """``follow(argument, caller scope)`` of what each call of the module-level function ``fn`` in
    this file passes as its parameter ``name`` (`None` where a call leaves it to a `None` default);
    None when ``fn`` is not one of this file's module-level functions, is used otherwise than called
    by name, is never called, or a call passes `*args`/`**kwargs` or leaves it to another default."""
    if ctx.module_functions.get(fn.name) is not fn:
        return None
    positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    defaults = parameter_defaults(fn.args)
    calls = 0
    found: list[str] = []
    for node in ctx.nodes(ast.Name):
        if node.id != fn.name:
            continue
        call = ctx.parent(node)
        if not isinstance(call, ast.Call) or call.func is not node \
                or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        calls += 1
        value = argument(call, positional.index(name), name) if name in positional else keyword(call, name)
        if value is None:
            value = defaults.get(name)
            if not (isinstance(value, ast.Constant) and value.value is None):
                return None
        leaves = follow(value, ctx.enclosing(call, FunctionNode))
        if leaves is None:
            return None
        found += leaves
    return found if calls else None


def _handed_leaves(fn: ast.AST, name: str, ctx: FileContext) -> list[str] | None:
    """[``HANDED_LEAF`` for the parameter ``name`` of ``fn``] where ``fn`` is a module-level function
    or the `__init__` of a module-level class (a trainer's `__init__(self, model, ...)`, whose callers
    build it in another file), or None (a method, a nested function, `*args`)."""
    if not isinstance(fn, FUNCTION_DEFS):
        return None
    owner = ctx.parent(fn)
    if owner is ctx.tree and ctx.module_functions.get(fn.name) is fn:
        callee, skipped = f"{ctx.module}.{fn.name}", 0
    elif fn.name == "__init__" and isinstance(owner, ast.ClassDef) and ctx.parent(owner) is ctx.tree:
        callee, skipped = f"{ctx.module}.{owner.name}", 1  # (its callers do not pass `self`)
    else:
        return None
    positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    if name in positional[skipped:]:
        position = str(positional.index(name) - skipped)
    elif any(a.arg == name for a in fn.args.kwonlyargs):
        position = "-"
    else:
        return None
    default = parameter_defaults(fn.args).get(name)
    none = "=None" if isinstance(default, ast.Constant) and default.value is None else ""
    return [f"{HANDED_LEAF}{callee}@{name}#{position}{none}"]


def _init_attribute_leaves(node: ast.AST | None, at: ast.AST, scope: ast.AST | None,
                           ctx: FileContext) -> list[str] | None:
    """The leaves of a constructor's `self.<attr>` wrapped there (`self.model = model.to(device)`, then
    `self.model = DataParallel(self.model)`): of every value that `__init__` assigns to it before the
    wrap (its own rewraps and conversions aside); None where it binds it otherwise, after the wrap, or
    not at all (a base class's constructor, a subclass's, may have)."""
    node = without_conversions(node)
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and isinstance(scope, ast.FunctionDef) and scope.name == "__init__" and scope.args.args
            and node.value.id == scope.args.args[0].arg):
        return None
    found: list[str] = []
    bound = False
    for stmt in _scope_statements(scope.body):
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        else:
            continue
        for target in targets:
            if not any(_same_attribute(n, node) for n in ast.walk(target)):
                continue
            if not isinstance(stmt, ast.Assign) or not _same_attribute(target, node) or stmt.lineno > at.lineno:
                return None
            if _wraps_attribute(stmt.value, node, ctx):
                continue
            leaves = instance_leaves(stmt.value, scope, ctx, flow=True)
            if leaves is None:
                return None
            found += leaves
            bound = True
    return found if bound else None


def _same_attribute(node: ast.AST, attribute: ast.Attribute) -> bool:
    """Is ``node`` the attribute `<name>.<attr>` that ``attribute`` spells?"""
    return isinstance(node, ast.Attribute) and node.attr == attribute.attr and isinstance(node.value, ast.Name) \
        and node.value.id == attribute.value.id


def _wraps_attribute(value: ast.AST, attribute: ast.Attribute, ctx: FileContext) -> bool:
    """Is ``value`` the attribute itself (`self.model.cuda()`) or a wrapper of it (``_wraps_name``)?"""
    value = without_conversions(value)
    if isinstance(value, ast.Call) and _wrapper_class(ctx.resolve(value.func) or ""):
        value = without_conversions(argument(value, 0, "module"))
    return _same_attribute(value, attribute)


_WRAPPER_CLASSES = DATAPARALLEL_CLASSES | DISTRIBUTED_DATAPARALLEL_CLASSES


def _wrapper_class(resolved: str) -> bool:
    """Is the resolved name torch's (Distributed)DataParallel, or another library's
    DistributedDataParallel (apex's)? A wrapper around the module it is handed."""
    return resolved in _WRAPPER_CLASSES or resolved.rpartition(".")[2] == DISTRIBUTED_DATAPARALLEL_NAME


def _wraps_name(value: ast.AST, name: str, ctx: FileContext) -> bool:
    """Is ``value`` the name itself (`model.cuda()`) or a (Distributed)DataParallel wrapper of it
    (`nn.DataParallel(model.cuda())`, apex's `DDP(model)`)?"""
    value = without_conversions(value)
    if isinstance(value, ast.Name):
        return value.id == name
    if not isinstance(value, ast.Call) or not _wrapper_class(ctx.resolve(value.func) or ""):
        return False
    inner = without_conversions(argument(value, 0, "module"))
    return isinstance(inner, ast.Name) and inner.id == name


def _binds_otherwise(stmt: ast.stmt, name: str) -> bool:
    """Does ``stmt`` bind ``name`` other than by a plain assignment?"""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name == name
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.partition(".")[0]) == name for a in stmt.names)
    targets: list[ast.AST] = []
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
        return name in stmt.names
    return any(target_binds(t, name) for t in targets)


def _registry_leaves(subscript: ast.Subscript, position: int | None, ctx: FileContext) -> list[str] | None:
    """What calling each entry builds (``_callable_leaves``: a class, or a builder function's
    ``CALL_LEAF``) of a module-level dict of classes and builders (at ``position`` of its tuples,
    when it holds tuples), or of a dict literal, when ``subscript`` indexes it by name: a registry
    looked up at run time."""
    registry = subscript.value
    if isinstance(registry, ast.Name):
        registry = None
        for stmt in ctx.tree.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == subscript.value.id
                                                    for t in stmt.targets):
                registry = stmt.value
            elif _binds_otherwise(stmt, subscript.value.id):
                return None
    if not isinstance(registry, ast.Dict) or not registry.values or None in registry.keys:
        return None
    found = []
    for value in registry.values:
        if position is not None:
            if not isinstance(value, (ast.Tuple, ast.List)) or position >= len(value.elts):
                return None
            value = value.elts[position]
        leaves = _callable_leaves(value, ctx)
        if leaves is None:
            return None
        found += leaves
    return found


def function_returns(ctx: FileContext) -> dict[str, list[str]]:
    """The module-level functions of this file whose every return is traced (see
    ``instance_leaves``), by qualified name -> the leaves of their returns: what another file's
    `DataParallel(build_model(cfg))` wraps when `build_model` is one of them."""
    return ctx.fact(_find_function_returns)


def _find_function_returns(ctx: FileContext) -> dict[str, list[str]]:
    found = {}
    for name, fn in ctx.module_functions.items():
        if isinstance(fn, ast.FunctionDef) and (leaves := _returns_of(fn, ctx, 0)):
            found[f"{ctx.module}.{name}"] = sorted(set(leaves))
        # (A getter of a registry's class: what calling its return builds, `CALLED_RETURN` after its name.)
        if isinstance(fn, ast.FunctionDef) and (leaves := _class_returns(fn, ctx)):
            found[f"{ctx.module}.{name}{CALLED_RETURN}"] = sorted(set(leaves))
    return found


def untraced_functions(ctx: FileContext, returns: dict[str, list[str]]) -> list[str]:
    """The module-level functions of this file (qualified) that ``function_returns`` does not trace."""
    return [f"{ctx.module}.{name}" for name in ctx.module_functions if f"{ctx.module}.{name}" not in returns]


def method_returns(ctx: FileContext) -> dict[str, list[str]]:
    """The methods of this file's classes that have no forward (a runner, an adapter, a trainer: not a
    model, whose builder methods make its layers) and return a value, by `<module>.<Class>.<method>` ->
    the leaves of their returns (``instance_leaves``), or ``UNTRACED_ITEM`` where one is not traced:
    what a base class's `self.model = self._init_model()` then `DataParallel(self.model)` wraps where
    each subclass, in this file or another, overrides `_init_model` (``OVERRIDE_LEAF``)."""
    return ctx.fact(_find_method_returns)


def _find_method_returns(ctx: FileContext) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for info in ctx.classes.values():
        if "forward" in info.methods:
            continue
        for method, fn in info.methods.items():
            if not isinstance(fn, ast.FunctionDef) or method.startswith("__") or not any(
                    isinstance(stmt, ast.Return) and stmt.value is not None
                    and not (isinstance(stmt.value, ast.Constant) and stmt.value.value is None)
                    for stmt in _scope_statements(fn.body)):
                continue  # (a base's `raise NotImplementedError` or `return None` builds nothing)
            leaves = _returns_of(fn, ctx, 0)
            found[f"{info.qualname}.{method}"] = sorted(set(leaves)) if leaves else [UNTRACED_ITEM]
    return found


def _self_method_leaves(inner: ast.AST | None, call: ast.Call, ctx: FileContext) -> list[str]:
    """``OVERRIDE_LEAF`` leaves for a wrapped module that a method of this file's class gets from a
    method of the same class on self (`self.model = self._init_model()`, then `DataParallel(self.model)`)
    that the class defines: which class runs is decided by the subclass's override. Empty otherwise."""
    leaves = []
    for construction in _constructions_of(inner, call, ctx, imported_calls=True):
        func = construction.func
        owner = ctx.enclosing(construction, ast.ClassDef)
        info = ctx.classes.get(owner.name) if owner is not None else None
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
                and info is not None and info.node is owner and func.attr in info.methods):
            return []
        leaves.append(f"{OVERRIDE_LEAF}{info.qualname}.{func.attr}")
    return leaves


def submodule_classes(ctx: FileContext) -> frozenset[str]:
    """Resolved names of classes this file builds inside an nn.Module of its own (other than itself),
    or whose instances a script of it passes to the constructor of the model it wraps."""
    return ctx.fact(_find_submodules)


def _find_submodules(ctx: FileContext) -> frozenset[str]:
    return frozenset(layer_owners(ctx))


def layer_owners(ctx: FileContext) -> dict[str, frozenset[str]]:
    """The submodule classes (see ``submodule_classes``) -> simple names of the classes they are
    layers of: the module class of this file whose code builds one, or the wrapped class whose
    constructor a script hands one. The project index follows these from the wrapped classes: a
    layer only of classes that nothing runs under DataParallel (a criterion's memory bank, the
    criterion built bare and applied to the gathered output) does not run there either."""
    return ctx.fact(_find_layer_owners)


def _find_layer_owners(ctx: FileContext) -> dict[str, frozenset[str]]:
    owners: dict[str, set[str]] = {}
    for part, owner in ctx.fact(_wrap_sites).parts:
        owners.setdefault(part, set()).add(owner.rsplit(".", 1)[-1])
    for name, info in ctx.classes.items():
        if not any(ctx.class_is_module(name)):
            continue
        for call in ctx.tree_index.nodes_within(info.node, ast.Call):
            func = part_class(call.func, ctx.classes, ctx.tree)  # (`Decoder._from_config(config)`: a Decoder layer)
            last = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
            if not may_name_class(last) or last == name:
                continue
            resolved = ctx.resolve(func)
            if resolved and not resolved.startswith("torch."):
                owners.setdefault(resolved, set()).add(name)
    return {part: frozenset(names) for part, names in owners.items()}


# The condition of a finding about a module handed to a class's constructor: the class keeps that
# argument as a submodule it calls (ClassIndex.keeps_module settles it from `kept_modules`).
KEPT_MODULE_CONDITION = "kept_module:"


def kept_modules(ctx: FileContext) -> dict[str, list[str]]:
    """Module classes of this file -> the `__init__` parameters they keep as submodules, as
    `name@position` (position after `self`): `self.<attr> = <parameter>` at the top level of
    `__init__` (not behind a test), with `self.<attr>(...)` called in a method of the class. A module
    handed there runs as part of the class: wrapped around a DataParallel wrapper (MEAL-V2's
    `DataParallel(discriminatorLoss(DataParallel(d)))`), the outer wrapper replicates the inner one."""
    found: dict[str, list[str]] = {}
    for name, info in ctx.classes.items():
        init = info.methods.get("__init__")
        if init is None or not any(ctx.class_is_module(name)):
            continue
        positions = {a.arg: k for k, a in enumerate([*init.args.posonlyargs, *init.args.args][1:])}
        positions.update((a.arg, -1) for a in init.args.kwonlyargs)
        stored: dict[str, str] = {}  # attribute -> parameter
        for statement in init.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                    and isinstance(statement.value, ast.Name) and statement.value.id in positions:
                target = statement.targets[0]
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    stored[target.attr] = statement.value.id
        # Most stored parameters are options (`self.config = config`) that nothing calls: the text
        # tells, without walking the class's calls.
        stored = {attr: param for attr, param in stored.items() if f"self.{attr}(" in ctx.source.text}
        if not stored:
            continue
        called = {call.func.attr for call in ctx.tree_index.nodes_within(info.node, ast.Call)
                  if isinstance(call.func, ast.Attribute) and call.func.attr in stored
                  and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"}
        kept = sorted(f"{stored[attr]}@{positions[stored[attr]]}" for attr in called)
        if kept:
            found[info.qualname] = kept
    return found


def wrap_evidence(model: ModelClass) -> str:
    """"wrapped" | "top-level" | "submodule", from this file's evidence (the project index
    refines "top-level" through the ``gathered:`` condition)."""
    qualname = model.info.qualname
    if qualname in wrapped_classes(model.ctx):
        return WRAPPED
    from dpcheck.analysis.outputs import child_classes

    if qualname in submodule_classes(model.ctx) or model.name in child_classes(model.ctx):
        return SUBMODULE
    return TOP_LEVEL


def parallelises_own_submodule(model: ModelClass) -> str | None:
    """The attribute of this class that a method of it runs in parallel itself, or None: one it
    assigns a (Distributed)DataParallel wrapper to (`self.model = nn.DataParallel(self.model)`,
    conditionally too; timm's `self.trainable_module = DDP(self.trainable_module)`), or one it
    passes to the functional `nn.parallel.data_parallel(self.net, x)` or replicates by hand
    (`replicas = replicate(self.net, device_ids)`, then scatter/parallel_apply/gather: DLRM's
    `parallel_forward`, DARTS's search controller). Such a class is the harness around the
    parallel model: its own code runs once, on the calling device, and the class of that
    attribute is the wrapped model (see ``harness_condition``)."""
    ctx = model.ctx
    # (Script facts only where a DataParallel form is named: `replicate` alone needs none.)
    facts = script_facts(ctx) if mentions_script_token(ctx) else None
    if facts is None and not ctx.fact(_names_replicate):
        return None
    for fn in model.all_methods:
        for node in fn.nodes(ast.Call):
            resolved = ctx.resolve(node.func) or ""
            if resolved in DATAPARALLEL_FUNCTIONS or resolved in REPLICATE_FUNCTIONS:
                inner = argument(node, 0, "network" if resolved in REPLICATE_FUNCTIONS else "module")
                name = fn.self_attr(inner) if inner is not None else None
                if name is not None:
                    return name
            elif resolved in DISTRIBUTED_DATAPARALLEL_CLASSES or facts is not None and (
                    (source := facts.dp_class(node)) is not None and not source.requires):
                name = _assigned_self_attr(node, fn, ctx)
                if name is not None:
                    return name
    return None


def replicates_by_hand(ctx: FileContext) -> bool:
    """Does the file call torch's `replicate` (`torch.nn.parallel.replicate(model, device_ids)`, then
    scatter, parallel_apply, gather: WaveRNN's `data_parallel_workaround`)? A hand-written
    data-parallel step: the project runs its models on replicas though no DataParallel wrap shows."""
    return ctx.fact(_names_replicate) and any(
        (ctx.resolve(call.func) or "") in REPLICATE_FUNCTIONS for call in ctx.nodes(ast.Call))


def _names_replicate(ctx: FileContext) -> bool:
    """Does the text name `replicate` at all? One scan per file: asked of every class, and a
    large file's text scanned again for each of its classes cost a few percent of the analysis."""
    return "replicate" in ctx.source.text


def _assigned_self_attr(call: ast.Call, fn, ctx: FileContext) -> str | None:
    """`self.x` that ``call``'s value is assigned to (through `.cuda()`/`.to()` chains and either
    arm of a conditional expression), or None."""
    node: ast.AST = call
    parent = ctx.parent(node)
    while isinstance(parent, (ast.IfExp, ast.Attribute, ast.Call)) and (
            not isinstance(parent, ast.Call) or parent.func is node) and (
            not isinstance(parent, ast.IfExp) or parent.test is not node):
        node, parent = parent, ctx.parent(parent)
    if isinstance(parent, ast.Assign) and parent.value is node:
        return next((name for t in parent.targets if (name := fn.self_attr(t)) is not None), None)
    return None


@record(frozen=True)
class Harness:
    """A class that parallelises its own submodule and that this file does not wrap: its own code
    runs on replicas only on ``condition`` (``wrapped:<class>``: some scanned file wraps it too),
    which every class rule's findings in its own code carry. The layers it builds as the
    parallelised submodule (`self.main = nn.Sequential(...)`, then `data_parallel(self.main, x)`)
    are that submodule's: they run on replicas."""

    condition: str
    submodule_spans: tuple[tuple[int, int, int, int], ...]

    def owns(self, node: ast.AST) -> bool:
        """Is ``node`` the harness's own code, not part of building the submodule it parallelises?"""
        span = _span(node)
        return span is None or not any(s[:2] <= span[:2] and span[2:] <= s[2:] for s in self.submodule_spans)


def _span(node: ast.AST) -> tuple[int, int, int, int] | None:
    if getattr(node, "end_lineno", None) is None:
        return None
    return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


def harness_of(model: ModelClass) -> Harness | None:
    """The harness facts of a class that parallelises its own submodule and that this file does
    not wrap; None for any other class (it runs on replicas as a wrapped model or inside one)."""
    attr = parallelises_own_submodule(model)
    if attr is None or wrap_evidence(model) == WRAPPED:
        return None
    facts = model.attrs.get(attr)
    spans = tuple(span for _, value, _ in (facts.assignments if facts else ()) if (span := _span(value)))
    return Harness(f"{WRAPPED_CONDITION}{model.info.qualname}", spans)


def harness_condition(model: ModelClass) -> str | None:
    """``wrapped:<class>`` for a harness (see ``Harness``), else None."""
    harness = harness_of(model)
    return harness.condition if harness else None



def _declared_all(ctx: FileContext) -> set[str] | None:
    """The names a literal `__all__` of the file declares, or None where it declares none."""
    return declared_all(ctx.tree)


def _unused_outside_api(ctx: FileContext) -> frozenset[str]:
    """The offline utilities and leftovers of a file, which users of the file do not wrap: names
    of this file's top-level, undecorated classes that a literal `__all__` leaves out, that no
    code outside the class's own body names except as the class tested by `isinstance`/
    `issubclass` (a weight-init switch over layer types builds nothing), and that no string names."""
    declared = _declared_all(ctx)
    if declared is None:
        return frozenset()
    return _unused_in_file(ctx, lambda name: name not in declared)


def unnamed_classes(ctx: FileContext) -> frozenset[str]:
    """In a file that declares no `__all__` (a star import takes every public name), its top-level,
    undecorated classes with a capitalised name that the file never uses, as
    ``_unused_outside_api`` reads use: whether another file names them is the index's question
    (see dpcheck.analysis.mentions)."""
    if _declared_all(ctx) is not None:
        return frozenset()
    return _unused_in_file(ctx, capitalised)


def _unused_in_file(ctx: FileContext, eligible) -> frozenset[str]:
    # A decorated class may be registered by its decorator (timm's register_notrace_module).
    candidates = {stmt.name: stmt for stmt in ctx.tree.body
                  if isinstance(stmt, ast.ClassDef) and eligible(stmt.name) and not stmt.decorator_list}
    if not candidates:
        return frozenset()
    names = ctx.nodes(ast.Name)
    index = ctx.tree_index
    position = index.position
    spans = {name: (position[node], position[node] + index.size[position[node]])
             for name, node in candidates.items()}
    type_tests = set()
    for call in ctx.nodes(ast.Call):
        func = call.func
        if func.__class__ is ast.Name and func.id in _TYPE_TESTS and len(call.args) == 2:
            type_tests.update(id(n) for n in index.subtree(call.args[1]) if n.__class__ is ast.Name)
    # Most of a file's names and strings name none of these: compress() and map() pick the few that do.
    # The scans stop once every candidate is used (most are: the layers later classes build).
    used = set()
    for node in compress(names, map(spans.__contains__, map(_id_of, names))):
        span = spans[node.id]
        if id(node) not in type_tests and not span[0] <= position[node] < span[1]:
            used.add(node.id)
            if len(used) == len(spans):
                return frozenset()
    # Named in a string (a registry or a lazy-import table looks classes up by name): used. (Only a
    # string can equal a class name, and every constant the parser makes can be hashed.)
    constants = ctx.nodes(ast.Constant)
    used.update(map(_value_of, compress(constants, map(spans.__contains__, map(_value_of, constants)))))
    return frozenset(candidates.keys() - used)


def wrapped_batch_dim(model: ModelClass) -> ast.AST | None:
    """The `dim=` a script of this file wraps the class with (None: dim 0, or not wrapped here)."""
    return wrapped_classes(model.ctx).get(model.info.qualname)


def batch_dim_is_zero(model: ModelClass) -> bool:
    """Does DataParallel split this class's inputs along dim 0? False when a script of this file
    wraps it with another `dim=`; else True on condition ``dim0:<class>`` (no scanned file wraps
    it with another dim), which the project index settles and the calling rule's findings carry."""
    dim = wrapped_batch_dim(model)
    if dim is not None and not _is_zero(dim):
        return False
    model.conditions.add(f"dim0:{model.info.qualname}")
    return True


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def summarize_wrapping(ctx: FileContext, result) -> None:
    """Fill ``result.builders``, ``.wrapped``, ``.wrap_candidates``, ``.returns``, ``.layer_owners``,
    ``.unused``, ``.unnamed``, ``.mentions``, ``.builds_by_name``, ``.partial_batches``, ``.switches_to_eval`` and
    ``.kept_modules`` for the project index."""
    result.layer_owners = {part: sorted(names) for part, names in sorted(layer_owners(ctx).items())}
    result.unused = sorted(f"{ctx.module}.{name}" for name in ctx.fact(_unused_outside_api))
    summarize_mentions(ctx, ctx.fact(unnamed_classes), result)
    result.returns = function_returns(ctx)
    result.untraced_functions = untraced_functions(ctx, result.returns)
    result.method_returns = method_returns(ctx)
    result.partial_batches = partial_batches(ctx)
    result.switches_to_eval = switches_to_eval(ctx)
    result.kept_modules = kept_modules(ctx)
    result.item_stores = item_stores(ctx)
    if not mentions_script_token(ctx):
        return
    result.wrapped = sorted(wrapped_classes(ctx))
    result.unresolved_wraps = unresolved_wrap_sites(ctx)
    result.handed_wraps = handed_wrap_sites(ctx)
    result.wrap_candidates = [sorted(set(leaves)) for leaves in wrap_candidates(ctx)]
    result.wrapped_alone = wrapped_alone(ctx)
    result.replaced_output = replaced_output(ctx)
    result.dataparallel_attributes = dataparallel_attributes(ctx)
    result.wrappers = {name: sorted(set(names)) for name, names in sorted(wrappers_of(ctx).items())}
    result.latent_wraps = latent_wraps(ctx)
    result.wrapped_dims = {name: ast.unparse(dim) for name, dim in wrapped_classes(ctx).items()
                           if dim is not None and not _is_zero(dim)}
    if mentions_dataparallel(ctx):
        qualify = {name: f"{ctx.module}.{name}" for name in script_facts(ctx).builders if "." not in name}
        result.builders = {qualify[name]: builder_conditions(script_facts(ctx), name)
                           for name in script_facts(ctx).builders if name in qualify}


_BUILTIN_NAMES = frozenset(dir(builtins))
# The condition of a finding about an instance's own state: an instance of the class may outlive
# one forward call (ClassIndex.outlives_call settles it from the lists summarize_construction makes).
OUTLIVES_CALL_CONDITION = "outlives_call:"


def summarize_construction(ctx: FileContext, models: list[ModelClass], result) -> None:
    """Fill ``result.built_per_call`` and ``.built_elsewhere`` (simple names) for the project index.

    A class built only inside forward-reachable code (`Regression(self.n)(x)` in a forward) is built
    anew on every call, on the replica's own thread: parallel_apply runs each replica under
    `torch.accelerator.device_index(device)`, so a bare `.cuda()` in its `__init__` lands on that
    replica's device, and nothing of it is shared between replicas. ``built_per_call``: names this
    file calls in forward-reachable code of its modules; ``built_elsewhere``: names it calls anywhere
    else (module scope, functions, `__init__` and the other methods), which are where an instance can
    outlive a call. A call by name is `Head(...)`, or `layers.Head(...)` through an imported module
    other than torch; builtins and the file's own functions build no class. Simple names keep it
    conservative: a star import or a re-export hides which class a name is, and any same-named call
    elsewhere counts. Runs after the rules, which have walked forward-reachable code by then."""
    if not models and "order" not in ctx.tree_index.__dict__:
        # No module class, and no rule looked below the statements (no DataParallel script): the
        # file is not walked for this alone. (A builder function in such a file that builds a class
        # another file's forward also builds per call is not seen.)
        return
    modules = {name for name, target in ctx.imports.aliases.items() if not target.startswith("torch")}
    seen: set[int] = set()
    forward_calls: list[ast.Call] = []
    for model in models:
        for fn in model.reachable:
            if id(fn.node) not in seen:
                seen.add(id(fn.node))
                forward_calls += fn.nodes(ast.Call)
    # Counted, not collected per call: a name is called elsewhere when the file calls it more often
    # than its forward-reachable code does. (Every file with a model pays this: map and compress
    # keep the per-call work in C.)
    in_forward = _called_names(forward_calls, modules)
    everywhere = _called_names(ctx.nodes(ast.Call), modules)
    skip = _BUILTIN_NAMES.union(ctx.module_functions)
    result.built_per_call = sorted(in_forward.keys() - skip)
    result.built_elsewhere = sorted(name for name, count in everywhere.items()
                                    if count > in_forward.get(name, 0) and name not in skip)


def _called_names(calls, modules: set[str]) -> Counter:
    """How often each name is called: `Head(...)`, and `layers.Head(...)` through a module in ``modules``."""
    funcs = list(map(_func_of, calls))
    kinds = list(map(type, funcs))
    counts = Counter(map(_id_of, compress(funcs, map(is_, kinds, repeat(ast.Name)))))
    attributes = list(compress(funcs, map(is_, kinds, repeat(ast.Attribute))))
    receivers = list(map(_value_of, attributes))
    named = list(compress(attributes, map(is_, map(type, receivers), repeat(ast.Name))))
    through_module = compress(named, map(modules.__contains__, map(_id_of, map(_value_of, named))))
    counts.update(map(_attr_of, through_module))
    return counts
