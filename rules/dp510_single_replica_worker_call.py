"""
## What it does
In a hand-written `parallel_apply` (a DataParallel subclass's, or a criterion's such as
PyTorch-Encoding's `_criterion_parallel_apply`), flags the direct call of the worker function that
runs when there is one replica (`else: _worker(0, modules[0], inputs[0], kwargs_tup[0],
devices[0])`) where it passes another number of positional arguments than the threads that run it
for several replicas (`threading.Thread(target=_worker, args=(i, module, input, target, kwargs,
device))`): the single-replica path binds its arguments to other parameters.

## Why is this bad?
PyTorch's own `parallel_apply` runs one thread per replica and calls the worker directly when
there is only one. Copies of it that add a parameter to the worker (the targets of a loss) often
update only the threaded call. The direct call then hands the keyword dict to `target` and a
device to `kwargs` (or leaves a parameter out: TypeError), and the replica raises `argument after
** must be a mapping`. It runs only when the batch is scattered to one replica (a batch of one
sample, the last batch of an epoch), so it shows up "after a random number of batches": latent, a
warning. Not reported when every scanned script that wraps a model passes `drop_last=True` to its
loader or only evaluates (DP604's reading of the loaders): the partial last batch never runs.

## How to fix
Call the worker with the same arguments on both paths (`_worker(0, modules[0], inputs[0],
targets[0], kwargs_tup[0], devices[0])`).
"""

from __future__ import annotations

import ast

from dpcheck.analysis.scripts import PARTIAL_BATCHES_CONDITION
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule

_THREADS = frozenset({"threading.Thread", "torch.multiprocessing.Process", "multiprocessing.Process"})


class SingleReplicaWorkerCall(Rule):
    code = "DP510"
    name = "single-replica-worker-call"
    severity = Severity.WARNING
    # The harness runs a model's forward with the stock DataParallel, not a project's parallel_apply.
    not_confirmable = TRAINING_SCRIPT
    summary = "A custom parallel_apply calls its worker with other arguments for one replica than its threads do"
    fix_hint = "Pass the worker the same arguments on the single-replica path as on the threaded one"
    bad_example = """
        import threading

        def criterion_parallel_apply(modules, inputs, targets, kwargs_tup, devices):
            results = {}

            def _worker(i, module, input, target, kwargs, device=None):
                results[i] = module(*(input + target), **kwargs)

            if len(modules) > 1:
                threads = [threading.Thread(target=_worker, args=(i, m, x, t, k, d))
                           for i, (m, x, t, k, d) in enumerate(zip(modules, inputs, targets, kwargs_tup, devices))]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            else:
                _worker(0, modules[0], inputs[0], kwargs_tup[0], devices[0])
            return [results[i] for i in range(len(inputs))]
    """
    good_example = """
        import threading

        def criterion_parallel_apply(modules, inputs, targets, kwargs_tup, devices):
            results = {}

            def _worker(i, module, input, target, kwargs, device=None):
                results[i] = module(*(input + target), **kwargs)

            if len(modules) > 1:
                threads = [threading.Thread(target=_worker, args=(i, m, x, t, k, d))
                           for i, (m, x, t, k, d) in enumerate(zip(modules, inputs, targets, kwargs_tup, devices))]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            else:
                _worker(0, modules[0], inputs[0], targets[0], kwargs_tup[0], devices[0])
            return [results[i] for i in range(len(inputs))]
    """

    def check_file(self, ctx):
        text = ctx.source.text
        if "target=" not in text or "args=" not in text:
            return
        for call in ctx.nodes(ast.Call):
            if ctx.resolve(call.func) not in _THREADS:
                continue
            worker = next((k.value for k in call.keywords if k.arg == "target"), None)
            scope = ctx.enclosing(call, FUNCTION_DEFS)
            if not isinstance(worker, ast.Name) or scope is None:
                continue
            definition = _definition(scope, worker.id, ctx)
            threaded = _threads_bind(call, definition) if definition is not None else None
            if threaded is None:
                continue
            for direct in ctx.tree_index.nodes_within(scope, ast.Call):
                if not (isinstance(direct.func, ast.Name) and direct.func.id == worker.id):
                    continue
                bound = _binds(definition, direct.args, [k.arg for k in direct.keywords])
                if bound is not None and bound != threaded:
                    yield self.violation(direct, f"`{worker.id}` is called here with {len(direct.args)} positional "
                                         f"arguments, binding {_names(definition, bound)}, but its threads (line "
                                         f"{call.lineno}) bind {_names(definition, threaded)}: when the batch is "
                                         "scattered to one replica (a batch of one sample), the arguments bind to "
                                         "other parameters and the replica raises",
                                         requires=(frozenset({f"{PARTIAL_BATCHES_CONDITION}{ctx.module}.{scope.name}"}),))


def _definition(scope, name: str, ctx) -> ast.FunctionDef | None:
    """The function ``name`` that ``scope`` defines (the worker of its threads), if one."""
    return next((node for node in ctx.tree_index.nodes_within(scope, ast.FunctionDef) if node.name == name), None)


def _threads_bind(call: ast.Call, definition: ast.FunctionDef) -> frozenset[str] | None:
    """The parameters a thread's `args=(...)` and `kwargs={...}` bind, None where they are not literal."""
    passed = next((k.value for k in call.keywords if k.arg == "args"), None)
    named = next((k.value for k in call.keywords if k.arg == "kwargs"), None)
    if not isinstance(passed, ast.Tuple) or named is not None and not (
            isinstance(named, ast.Dict) and all(isinstance(key, ast.Constant) for key in named.keys)):
        return None
    return _binds(definition, passed.elts, [key.value for key in named.keys] if named is not None else [])


def _binds(definition: ast.FunctionDef, args, keywords) -> frozenset[str] | None:
    """The parameters of ``definition`` that these positional arguments and keyword names bind; None
    where a starred argument, `**` or a variadic parameter leaves it open."""
    params = definition.args
    positional = [a.arg for a in (*params.posonlyargs, *params.args)]
    if params.vararg or any(isinstance(a, ast.Starred) for a in args) or None in keywords \
            or len(args) > len(positional):
        return None
    return frozenset(positional[:len(args)]) | frozenset(keywords)


def _names(definition: ast.FunctionDef, bound: frozenset[str]) -> str:
    """The bound parameters in the order the function declares them."""
    order = [a.arg for a in (*definition.args.posonlyargs, *definition.args.args, *definition.args.kwonlyargs)]
    return "(" + ", ".join(name for name in order if name in bound) + ")"
