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
from collections import Counter
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING

from dpcheck.analysis.classes import WRAPPED_CONDITION
from dpcheck.analysis.dataflow import argument, keyword
from dpcheck.analysis.scripts import mentions_dataparallel, mentions_script_token, script_facts, target_text
from dpcheck.analysis.torch_api import FunctionNode
from dpcheck.constants import DATAPARALLEL_FUNCTIONS, DISTRIBUTED_DATAPARALLEL_CLASSES, REPLICATE_FUNCTIONS
from dpcheck.record import record

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext
    from dpcheck.analysis.model_class import ModelClass

WRAPPED, TOP_LEVEL, SUBMODULE = "wrapped", "top-level", "submodule"
# Classmethods that build an instance of their class (transformers, diffusers, timm-style hubs).
_ALTERNATE_CONSTRUCTORS = frozenset({"from_pretrained", "from_config", "from_name"})
_TYPE_TESTS = frozenset({"isinstance", "issubclass"})
# Over every name, string or call of a file, in C (map, compress) rather than a Python step per node.
_id_of = attrgetter("id")
_value_of = attrgetter("value")
_attr_of = attrgetter("attr")
_func_of = attrgetter("func")


def wrapped_classes(ctx: FileContext) -> dict[str, ast.AST | None]:
    """Resolved names of the classes this file wraps -> the `dim=` of that wrapping (or None)."""
    return ctx.fact(_find_wrapped)


def _find_wrapped(ctx: FileContext) -> dict[str, ast.AST | None]:
    return ctx.fact(_wrap_sites)[0]


def unresolved_wrap_sites(ctx: FileContext) -> list[int]:
    """Lines of this file's wrap sites whose module could not be traced to a class
    (`DataParallel(build_model(cfg))`): what the project wraps is then not fully known."""
    return ctx.fact(_wrap_sites)[1]


def _wrap_sites(ctx: FileContext) -> tuple[dict[str, ast.AST | None], list[int], frozenset[str]]:
    """(wrapped classes -> their `dim=`, lines of wrap sites traced to no class, (class, wrapped
    class) for each class whose instances the script passes to the wrapped model's constructor)."""
    found: dict[str, ast.AST | None] = {}
    unresolved: list[int] = []
    parts: set[tuple[str, str]] = set()
    if not mentions_script_token(ctx):
        return found, unresolved, frozenset()
    facts = script_facts(ctx)
    sites = [(call, facts.source_of(call).dim) for call in facts.dp_calls]
    sites += [(call, keyword(call, "dim"))
              for call in facts.data_parallel_calls]
    for call, dim in sites:
        inner = argument(call, 0, "module")
        constructions = _constructions_of(inner, call, ctx)
        for construction in constructions:
            owner = _class_built(construction, ctx)
            found.setdefault(owner, dim)
            # `model = Seq2Seq(encoder, decoder)` then `DataParallel(model)`, with `encoder = Encoder(...)`:
            # the encoder runs inside the wrapped model's forward, it is not what DataParallel wraps.
            for arg in [*construction.args, *(k.value for k in construction.keywords)]:
                parts.update((part, owner) for part in classes_of(arg, construction, ctx))
        # A lower-case name imported from another file may be a class (MEAL-V2's
        # `discriminatorLoss(d)`) or a builder function: recorded as wrapped all the same. The
        # project index counts only names that are classes as wrapped, and while a wrapped name
        # is no scanned class (a builder, which may return any class) it demotes nothing to advice.
        maybe = [c for c in _constructions_of(inner, call, ctx, imported_calls=True) if c not in constructions]
        for construction in maybe:
            found.setdefault(_class_built(construction, ctx), dim)
        if not constructions and not maybe:
            unresolved.append(call.lineno)
    return found, unresolved, frozenset(parts)


def classes_of(node: ast.AST | None, at: ast.AST, ctx: FileContext) -> list[str]:
    """Classes an expression may be an instance of (see ``_constructions_of``)."""
    return [_class_built(call, ctx) for call in _constructions_of(node, at, ctx)]


def _class_built(construction: ast.Call, ctx: FileContext) -> str:
    func = construction.func
    if isinstance(func, ast.Attribute) and func.attr in _ALTERNATE_CONSTRUCTORS:
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
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "cuda", "to", "train", "eval", "float", "half"):
        node = node.func.value
    if isinstance(node, ast.IfExp):
        return _constructions_of(node.body, at, ctx, depth + 1, imported_calls) + \
            _constructions_of(node.orelse, at, ctx, depth + 1, imported_calls)
    if isinstance(node, ast.Call):
        name = _class_built(node, ctx)
        last = name.rsplit(".", 1)[-1]
        local = ctx.local_name(name)
        if (last[:1].isupper() or local in ctx.classes) and not name.startswith("torch."):
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
    text = target_text(node)
    if text is None:
        return []
    attribute = text.startswith("self.")
    scope = facts.scope_of(at, attribute=attribute)
    found: list[ast.Call] = []
    for sub in ctx.tree_index.nodes_within(scope, ast.Assign) if scope is not ctx.tree else ctx.nodes(ast.Assign):
        if any(target_text(t) == text for t in sub.targets) \
                and facts.scope_of(sub, attribute=attribute) is scope:
            found += _constructions_of(sub.value, sub, ctx, depth + 1, imported_calls)
    return found


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
    for part, owner in ctx.fact(_wrap_sites)[2]:
        owners.setdefault(part, set()).add(owner.rsplit(".", 1)[-1])
    for name, info in ctx.classes.items():
        if not any(ctx.class_is_module(name)):
            continue
        for call in ctx.tree_index.nodes_within(info.node, ast.Call):
            func = call.func
            last = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else ""
            if not last[:1].isupper() or last == name:
                continue
            resolved = ctx.resolve(func)
            if resolved and not resolved.startswith("torch."):
                owners.setdefault(resolved, set()).add(name)
    return {part: frozenset(names) for part, names in owners.items()}


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



def _unused_outside_api(ctx: FileContext) -> frozenset[str]:
    """The offline utilities and leftovers of a file, which users of the file do not wrap: names
    of this file's top-level, undecorated classes that a literal `__all__` leaves out, that no
    code outside the class's own body names except as the class tested by `isinstance`/
    `issubclass` (a weight-init switch over layer types builds nothing), and that no string names."""
    declared = None
    for stmt in ctx.tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets) \
                and isinstance(stmt.value, (ast.List, ast.Tuple)):
            declared = {e.value for e in stmt.value.elts if isinstance(e, ast.Constant)}
    if declared is None:
        return frozenset()
    # A decorated class may be registered by its decorator (timm's register_notrace_module).
    candidates = {stmt.name: stmt for stmt in ctx.tree.body
                  if isinstance(stmt, ast.ClassDef) and stmt.name not in declared and not stmt.decorator_list}
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
    """Fill ``result.builders``, ``.wrapped``, ``.layer_owners`` and ``.unused`` for the project index."""
    result.layer_owners = {part: sorted(names) for part, names in sorted(layer_owners(ctx).items())}
    result.unused = sorted(f"{ctx.module}.{name}" for name in ctx.fact(_unused_outside_api))
    if not mentions_script_token(ctx):
        return
    result.wrapped = sorted(wrapped_classes(ctx))
    result.unresolved_wraps = unresolved_wrap_sites(ctx)
    result.wrapped_dims = {name: ast.unparse(dim) for name, dim in wrapped_classes(ctx).items()
                           if dim is not None and not _is_zero(dim)}
    if mentions_dataparallel(ctx):
        qualify = {name: f"{ctx.module}.{name}" for name in script_facts(ctx).builders if "." not in name}
        result.builders = {qualify[name]: sorted(source.requires)
                           for name, source in script_facts(ctx).builders.items() if name in qualify}


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
