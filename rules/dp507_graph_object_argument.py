"""
## What it does
Flags a call of an `nn.DataParallel` wrapper in a training script that passes a graph
library's batch object: a PyTorch Geometric `Data`, `HeteroData` or `Batch` (built in the
script, `Batch.from_data_list(...)`, an item `dataset[0]` of a `torch_geometric.datasets`
dataset, or a batch of a `torch_geometric` loader the call's loop iterates), or a DGL graph
(`dgl.graph(...)`, `dgl.batch(...)`), directly, through a local name, or moved with
`.to(device)` / `.cuda()`.

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

from dpcheck.analysis.bindings import reaching_assignment, reaching_binding
from dpcheck.analysis.context import code_names
from dpcheck.analysis.scripts import STOCK_METHOD_CONDITION, mentions_dataparallel, script_facts
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
            wrap = facts.wrap_for(call.func)
            if wrap is None or "scatter" in wrap.source.note:
                continue  # not a wrapper, or one whose own scatter decides
            subclasses = sorted(c.partition(":")[2] for c in wrap.source.requires if c.startswith("dp:"))
            if any(name.startswith(_GRAPH_LIBRARIES) for name in subclasses):
                continue  # the graph library's own wrapper scatters its objects
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                why = _graph_object(arg, call, ctx, _FOLLOW_STEPS)
                if why is None:
                    continue
                # A DataParallel subclass of another file: only where it keeps the stock scatter.
                stock = tuple(frozenset({f"{STOCK_METHOD_CONDITION}scatter:{name}"}) for name in subclasses)
                yield self.violation(arg, f"{why} passed to the DataParallel model: scatter splits only tensors "
                                     "(and the tensors in lists, tuples and dicts) and hands this object whole to "
                                     "every replica, so the replicas on other GPUs run on the first device's graph "
                                     "(a device mismatch), or each computes every node and the gathered output has "
                                     "N times the rows", requires=wrap.requires + stock)
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
    (`for data in loader`, `for i, data in enumerate(tqdm(loader))`), when that binding is the one
    reaching ``at`` (not `batch = batch.x` before it), or None."""
    loop = reaching_binding(ctx, name.id, at, module_fallback=True)
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
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
    if not (isinstance(target, ast.Name) and target.id == name.id and isinstance(source, ast.Call)):
        return None
    loader = ctx.resolve(source.func) or ""
    if loader.startswith(_GRAPH_LOADER_MODULES) and loader.endswith("Loader") \
            and loader.rpartition(".")[2] not in _LIST_LOADERS:
        return source
    return None
