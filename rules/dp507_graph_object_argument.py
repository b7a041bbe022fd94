"""
## What it does
Flags a call of an `nn.DataParallel` wrapper in a training script that passes a graph
library's batch object: a PyTorch Geometric `Data`, `HeteroData` or `Batch` (built in the
script, `Batch.from_data_list(...)`, an item `dataset[0]` of a `torch_geometric.datasets`
dataset, or a batch of a `torch_geometric` loader the call's loop iterates), or a DGL graph
(`dgl.graph(...)`, `dgl.batch(...)`), directly, through a local name, or moved with
`.to(device)` / `.cuda()`. A loader whose `collate_fn` is a function of the file (given as a
keyword or through a `**params` dict, `params["collate_fn"] = collate`) yields what that function
returns: DGL's batching idiom `return dgl.batch(graphs), torch.tensor(labels)` puts a graph in the
first name of `for bg, labels in loader`. A rebinding in the loop that keeps the object
(`bg = bg.to(device)`, `v_d = v_d`), or one in an `if` arm whose other arm keeps it, leaves the
batch's graph reaching the call.

A DataParallel subclass that defines its own `scatter` (PyG's `torch_geometric.nn.DataParallel`,
which splits a list of `Data` objects per device, or one in a scanned file) decides how its
inputs reach each device: calls through it are not flagged.

## Why is this bad?
DataParallel's scatter splits tensors and walks lists, tuples and dicts; any other object is
handed whole, by reference, to every replica. A graph object is none of these, so every replica
receives the whole graph, with its tensors on the device it was moved to: the replica on the
second GPU runs its weights on the first GPU's node features and raises `Expected all tensors
to be on the same device` on every step. Where forward moves the graph to its own device, each
replica computes every node and the gathered output has N times the rows the masks and labels
index. The graph libraries ship their own wrappers for this reason.

## How to fix
Use the library's data-parallel wrapper (`torch_geometric.nn.DataParallel` with a
`DataListLoader`), `DistributedDataParallel` with a graph sampler, or pass the node features and
edges as tensors whose dim 0 the batch splits.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_assignment, reaching_binding, statement_list
from dpcheck.analysis.context import code_names
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule

# The graph libraries whose objects scatter hands whole to every replica; a file whose code names
# none of them is not looked at further.
_GRAPH_LIBRARIES = ("torch_geometric", "dgl")
# Calls that build one graph object (resolved names).
_GRAPH_CONSTRUCTORS = frozenset({
    "torch_geometric.data.Data", "torch_geometric.data.HeteroData", "torch_geometric.data.Batch",
    "torch_geometric.data.Batch.from_data_list", "torch_geometric.data.data.Data",
    "torch_geometric.data.hetero_data.HeteroData", "torch_geometric.data.batch.Batch",
    "dgl.graph", "dgl.heterograph", "dgl.batch", "dgl.DGLGraph", "dgl.DGLHeteroGraph",
})
# Datasets whose integer-indexed item is a `Data` object.
_GRAPH_DATASETS = "torch_geometric.datasets."
# Loaders whose every batch is a `Batch` (or `Data`) object; DataListLoader yields plain lists.
_GRAPH_LOADER_MODULES = ("torch_geometric.loader.", "torch_geometric.data.")
_LIST_LOADERS = frozenset({"DataListLoader"})
# Methods that return the same kind of object (`data.to(device)` is still a `Data`).
_SAME_OBJECT_METHODS = frozenset({"to", "cuda", "cpu", "pin_memory", "clone", "contiguous"})
# Iterating one of these over a loader still yields its batches.
_LOOP_WRAPPERS = frozenset({"tqdm", "iter", "list"})
# How many names to follow back from an argument to the value it was bound to.
_FOLLOW_STEPS = 3


class GraphObjectArgument(Rule):
    code = "DP507"
    name = "graph-object-argument"
    severity = Severity.ERROR
    # The harness runs a model's forward on example inputs it builds, not the script's call.
    not_confirmable = TRAINING_SCRIPT
    summary = "A graph object (PyG Data/Batch, DGL graph) passed to a DataParallel model reaches every replica whole"
    fix_hint = "Use torch_geometric.nn.DataParallel with a DataListLoader, or DistributedDataParallel"
    bad_example = """
        from torch_geometric.datasets import Planetoid

        dataset = Planetoid(root="/tmp/Cora", name="Cora")
        model = nn.DataParallel(GCN()).cuda()
        data = dataset[0].cuda()
        out = model(data)
    """
    good_example = """
        from torch_geometric.datasets import Planetoid

        dataset = Planetoid(root="/tmp/Cora", name="Cora")
        model = nn.DataParallel(GCN()).cuda()
        data = dataset[0].cuda()
        out = model(data.x, data.edge_index)
    """

    def check_file(self, ctx):
        names = ctx.fact(code_names)  # identifiers as Python reads them (imports included), not the text
        if not any(library in names for library in _GRAPH_LIBRARIES) or not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in ctx.nodes(ast.Call):
            wrap = facts.called_wrap(call)
            if wrap is None or "scatter" in wrap.source.note:
                continue  # not a wrapper, or one whose own scatter decides
            subclasses = sorted(c.partition(":")[2] for c in wrap.source.requires if c.startswith("dp:"))
            if any(name.startswith(_GRAPH_LIBRARIES) for name in subclasses):
                continue  # the graph library's own wrapper scatters its objects
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                why = _graph_object(arg, call, ctx, _FOLLOW_STEPS)
                if why is None:
                    continue
                yield self.violation(arg, f"{why} passed to the DataParallel model: scatter splits only tensors "
                                     "(and the tensors in lists, tuples and dicts) and hands this object whole to "
                                     "every replica, so the replicas on other GPUs run on the first device's graph "
                                     "(a device mismatch), or each computes every node and the gathered output has "
                                     "N times the rows", requires=wrap.requires + wrap.keeps_stock("scatter"))
                break


def _graph_object(node, at, ctx, steps) -> str | None:
    """Why ``node``, read at ``at``, holds a graph object, or None when the file does not show one."""
    shown = node
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _SAME_OBJECT_METHODS:
        node = node.func.value  # `data.to(device)`: the same kind of object
    if isinstance(node, ast.Call):
        name = ctx.resolve(node.func) or ""
        if name in _GRAPH_CONSTRUCTORS:
            return f"`{_short(shown)}` (a graph object)"
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, int) and not isinstance(node.slice.value, bool):
        dataset = _bound_value(node.value, at, ctx, steps)
        if isinstance(dataset, ast.Call) and (ctx.resolve(dataset.func) or "").startswith(_GRAPH_DATASETS):
            return f"`{_short(shown)}` (a `Data` item of a torch_geometric dataset)"
        return None
    if isinstance(node, ast.Name) and steps > 0:
        loader = _loop_loader(node, at, ctx, steps)
        if isinstance(loader, tuple):
            source, collate, why = loader
            return f"`{node.id}` (from a batch of the loader on line {source.lineno}, whose collate_fn " \
                   f"`{collate.name}` returns {why})"
        if loader is not None:
            return f"`{node.id}` (a batch of the graph loader on line {loader.lineno})"
        value = _bound_value(node, at, ctx, steps)
        if value is not None:
            why = _graph_object(value, value, ctx, steps - 1)
            if why is not None:
                return f"`{node.id}`, bound to {why},"
    return None


def _short(node) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def _bound_value(node, at, ctx, steps):
    """The value of the plain assignment of a name that reaches ``at`` (else the module's only one),
    or None (a parameter, a loop or `with` target, a rebinding, bindings on several paths)."""
    if not isinstance(node, ast.Name) or steps <= 0:
        return None
    binding = reaching_assignment(ctx, node.id, at, module_fallback=True)
    return binding.value if binding is not None else None


def _loop_loader(name, at, ctx, steps):
    """The graph loader construction whose batches the `for` loop around ``at`` binds to ``name``
    (`for data in loader`, `for i, data in enumerate(tqdm(loader))`), when that binding reaches
    ``at`` (not `batch = batch.x` before it) on some path (``_loop_reaching``); or, for a loader
    whose `collate_fn` is a function of this file that returns a graph object where the loop binds
    ``name`` (`for bg, labels in loader` with `return dgl.batch(graphs), torch.tensor(labels)`),
    (the loader, that function, why); or None."""
    loop = _loop_reaching(ctx, name.id, at, _FOLLOW_STEPS)
    if loop is None:
        return None
    source, target = loop.iter, loop.target
    for _ in range(_FOLLOW_STEPS + 2):
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.args:
            if source.func.id == "enumerate" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                source, target = source.args[0], target.elts[1]
                continue
            if source.func.id in _LOOP_WRAPPERS:
                source = source.args[0]
                continue
        if isinstance(source, ast.Name):
            source = _bound_value(source, loop, ctx, steps)
            continue
        break
    # The element of each batch the loop binds to ``name``: the whole batch (None), or the k-th of a
    # tuple it unpacks (`for v_d, v_p, label in loader`).
    element = None
    if isinstance(target, ast.Tuple):
        element = next((k for k, elt in enumerate(target.elts) if isinstance(elt, ast.Name) and elt.id == name.id),
                       None)
        if element is None or any(isinstance(elt, ast.Starred) for elt in target.elts):
            return None
    elif not (isinstance(target, ast.Name) and target.id == name.id):
        return None
    if not isinstance(source, ast.Call):
        return None
    loader = ctx.resolve(source.func) or ""
    if element is None and loader.startswith(_GRAPH_LOADER_MODULES) and loader.endswith("Loader") \
            and loader.rpartition(".")[2] not in _LIST_LOADERS:
        return source
    if loader.endswith("DataLoader"):
        for collate in _collate_functions(source, ctx):
            why = _collated_graph(collate, element, len(target.elts) if element is not None else 0, ctx, steps)
            if why is not None:
                return source, collate, why
    return None


def _loop_reaching(ctx, name: str, at, steps):
    """The `for` loop whose target's binding of ``name`` reaches ``at`` on some path: the binding
    that reaches on every path (``reaching_binding``), through rebindings that keep the object
    (`v_d = v_d`, `data = data.to(device)`), or, after an `if` that binds the name in its arms, through
    an arm that keeps it or does not bind it (`if graph_input: v_d = v_d` / `else: v_d =
    v_d.float()`): a graph reaches the call on that arm's path."""
    if steps <= 0:
        return None
    binding = reaching_binding(ctx, name, at, module_fallback=True)
    if isinstance(binding, (ast.For, ast.AsyncFor)):
        return binding
    if binding is not None:
        return _loop_reaching(ctx, name, binding, steps - 1) if _keeps_object(binding, name) else None
    statement = at if isinstance(at, ast.stmt) else ctx.enclosing(at, ast.stmt)
    holder = ctx.parent(statement) if statement is not None else None
    block = statement_list(holder, statement) if holder is not None else None
    if block is None:
        return None
    branch = next((s for s in reversed(block[:block.index(statement)]) if _binds(s, name)), None)
    if not isinstance(branch, ast.If):
        return None
    for arm in (branch.body, branch.orelse):
        last = next((s for s in reversed(arm) if _binds(s, name)), None)
        if last is None:
            found = _loop_reaching(ctx, name, branch, steps - 1)
        elif _keeps_object(last, name):
            found = _loop_reaching(ctx, name, last, steps - 1)
        else:
            found = None
        if found is not None:
            return found
    return None


def _binds(stmt, name: str) -> bool:
    return any(isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and n.id == name for n in ast.walk(stmt))


def _keeps_object(stmt, name: str) -> bool:
    """`x = x`, `x = x.to(device)`: the name still holds the object it held."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name):
        return False
    value = stmt.value
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _SAME_OBJECT_METHODS:
        value = value.func.value
    return isinstance(value, ast.Name) and value.id == name


def _collate_functions(loader: ast.Call, ctx) -> list:
    """The functions of this file a loader may batch with: its `collate_fn=` keyword, or the
    `"collate_fn"` of a dict it is given as `**params` (in the literal, or stored later,
    `params["collate_fn"] = dgl_collate_func`, in the same scope)."""
    values = [k.value for k in loader.keywords if k.arg == "collate_fn"]
    facts = script_facts(ctx)
    for spread in (k.value for k in loader.keywords if k.arg is None and isinstance(k.value, ast.Name)):
        scope = facts.scope_of(loader)
        for stmt in ctx.nodes(ast.Assign):
            if facts.scope_of(stmt) is not scope or stmt.lineno > loader.lineno:
                continue
            for target in stmt.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                        and target.value.id == spread.id and isinstance(target.slice, ast.Constant) \
                        and target.slice.value == "collate_fn":
                    values.append(stmt.value)
                elif isinstance(target, ast.Name) and target.id == spread.id and isinstance(stmt.value, ast.Dict):
                    values += [v for key, v in zip(stmt.value.keys, stmt.value.values)
                               if isinstance(key, ast.Constant) and key.value == "collate_fn"]
    functions = ctx.module_functions
    return [functions[v.id] for v in values if isinstance(v, ast.Name) and v.id in functions]


def _collated_graph(collate, element, width, ctx, steps) -> str | None:
    """Why a return of ``collate`` holds a graph object where the loop binds its name: the whole
    return (``element`` None), or element ``element`` of a tuple of ``width`` it returns."""
    for ret in ctx.tree_index.nodes_within(collate, ast.Return):
        value = ret.value
        if element is not None:
            if not (isinstance(value, ast.Tuple) and len(value.elts) == width):
                continue
            value = value.elts[element]
        if isinstance(value, ast.Name):
            binding = reaching_assignment(ctx, value.id, ret)  # `d = dgl.batch(d)` after `d, p, y = zip(*x)`
            value = binding.value if binding is not None else None
        if value is not None and (why := _graph_object(value, ret, ctx, steps - 1)) is not None:
            return why
    return None

