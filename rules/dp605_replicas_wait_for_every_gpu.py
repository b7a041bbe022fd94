"""
## What it does
Flags a module whose forward synchronises its replicas through queues that its constructor sizes
for every visible GPU (`self.devices = list(range(torch.cuda.device_count()))`, then
`self.master_queue = Queue(len(self.worker_ids))` and one `Queue(1)` per worker): the replica on
the first device collects a statistic from each of the others and hands the result back, as the
queue-based synchronised BatchNorm of PyTorch-Encoding (EncNet, DANet, GANet) and the first
in-place ABN do. The finding is on forward's test of which device the replica runs on (`if
x.get_device() == self.devices[0]:`), or on its first read of a queue.

## Why is this bad?
DataParallel runs one replica per chunk of the batch, and scatter makes at most one chunk per
sample: a batch with fewer samples than GPUs (`batch_size=1` on a multi-GPU machine, the last
batch of an epoch), or a wrapper given fewer `device_ids` than there are visible GPUs, runs fewer
replicas than the module waits for. In training the first replica blocks on its queue for workers
that never run: the program hangs without an error. Latent: it needs such a batch or such a
wrap, so a warning.

## How to fix
Use `nn.SyncBatchNorm` under DistributedDataParallel, or a synchronised BatchNorm that counts the
replicas of each call (`DataParallelWithCallback` from Synchronized-BatchNorm-PyTorch); keep
batches of at least as many samples as GPUs (`drop_last=True`) and wrap every visible GPU.
"""

from __future__ import annotations

import ast

from dpcheck.findings import Severity
from dpcheck.rule import Rule

# Queues one thread can block on until another puts into them.
_QUEUES = frozenset({"queue.Queue", "Queue.Queue", "queue.SimpleQueue", "queue.LifoQueue",
                     "multiprocessing.Queue", "torch.multiprocessing.Queue"})
_DEVICE_COUNT = "torch.cuda.device_count"


class ReplicasWaitForEveryGpu(Rule):
    code = "DP605"
    name = "replicas-wait-for-every-gpu"
    severity = Severity.WARNING
    forward_code_only = True
    summary = "Replicas synchronised through queues sized for every visible GPU hang when fewer replicas run"
    fix_hint = "Use nn.SyncBatchNorm under DDP, or a sync that counts each call's replicas; keep batch >= GPU count"
    bad_example = """
        from queue import Queue

        class SyncNorm(nn.BatchNorm1d):
            def __init__(self, n):
                super().__init__(n)
                self.devices = list(range(torch.cuda.device_count()))
                self.worker_ids = self.devices[1:]
                self.master_queue = Queue(len(self.worker_ids))

            def forward(self, x):
                if x.get_device() == self.devices[0]:
                    for _ in self.worker_ids:
                        self.master_queue.get()
                else:
                    self.master_queue.put(x.sum(0))
                return super().forward(x)
    """
    good_example = """
        class Norm(nn.BatchNorm1d):
            def __init__(self, n):
                super().__init__(n)
                self.devices = list(range(torch.cuda.device_count()))

            def forward(self, x):
                return super().forward(x)
    """

    def check_class(self, model):
        ctx = model.ctx
        text = ctx.source.text
        if "Queue" not in text or "device_count" not in text:
            return
        resolve = ctx.resolve
        queues: set[str] = set()
        counted = False
        for fn in model.all_methods:
            for call in fn.nodes(ast.Call):
                name = resolve(call.func)
                counted = counted or name == _DEVICE_COUNT
            for node in fn.nodes(ast.Assign):
                if any(isinstance(sub, ast.Call) and resolve(sub.func) in _QUEUES for sub in ast.walk(node.value)):
                    queues.update(a for a in (fn.self_attr(t) for t in node.targets) if a is not None)
        if not queues or not counted:
            return
        first_read = test = None
        for fn in model.reachable:
            for node in fn.nodes(ast.Attribute):
                if first_read is None and isinstance(node.ctx, ast.Load) and fn.self_attr(node) in queues:
                    first_read = node
            for node in fn.nodes(ast.Compare):
                if test is None and _device_role_test(node, fn):
                    test = node
        if first_read is None:
            return  # forward never reaches the queues
        where = test if test is not None else first_read
        yield self.violation(where, f"forward synchronises the replicas through `self.{min(queues)}`, "
                             "queues the constructor sets up for every visible GPU "
                             "(`torch.cuda.device_count()`): a batch with fewer samples than GPUs, or a wrapper "
                             "given fewer device_ids, runs fewer replicas, and in training the first replica waits "
                             "for the missing ones forever (a hang)")


def _device_role_test(node: ast.Compare, fn) -> bool:
    """Is ``node`` a test of the replica's device against an entry of a device list kept on self
    (`x.get_device() == self.devices[0]`)?"""
    sides = [node.left, *node.comparators]
    reads_device = any(isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "get_device"
                       or isinstance(sub, ast.Attribute) and sub.attr in ("device", "index")
                       for side in sides for sub in ast.walk(side))
    listed = any(isinstance(side, ast.Subscript) and fn.self_attr(side.value) is not None for side in sides)
    return reads_device and listed
