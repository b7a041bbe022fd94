"""Run one model on one device and under DataParallel on N devices, and compare.

For each batch size: build the model from a fixed seed and copy it (a second build where
a copy would share state with it), run the reference on one device (forward, backward of
a reduction of the output, a snapshot of module state), run the DataParallel steps
(replicate, scatter, parallel_apply in threads, gather, backward) on the copy, and turn
every difference into an observation:
what differed (an :class:`~dpcheck.findings.ObservationKind`), the evidence in words, and
where (the model-file line, the attribute, the output leaf, the argument) as data. Which
rule an observation confirms is the rules' business (``Rule.confirms``), not the harness's.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import copyreg
import enum
import functools
import itertools
import math
import re
import sys
import threading
import traceback
import types
import warnings
import weakref
from typing import Any, Callable

import torch

from torch.nn.modules.batchnorm import _BatchNorm

from dpcheck.confirmation import Observation
from dpcheck.findings import ObservationKind as K
from dpcheck.record import field, record, replace

# Attributes every nn.Module has: not model state.
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()).keys()) | {"_former_parameters", "_is_replica"}
_ATOL, _RTOL = 1e-4, 1e-3
# Every generator is seeded with this before the single-device step and again before the
# DataParallel step: a forward that draws (a power iteration's first vector, noise) draws the same
# numbers in both, on each device, as identically seeded GPUs give each replica. Without it the
# two runs drew from wherever the generators stood (on real GPUs, the eval pass's runs from where
# the training runs left cuda:0 and cuda:1), and a draw the randomness probe did not see change
# the outputs (it reaches only the gradients, or only eval mode) was reported as a difference.
_STEP_SEED = 1
# Half precision: each replica's kernels block a smaller batch and DataParallel sums the
# replicas' gradients, which rounds differently from one device at ~3 significant digits.
_LOW_PRECISION = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}
# A parameter's gradient is a sum whose terms can cancel exactly: a layer whose output is summed
# after a BatchNorm (the harness backpropagates the sum of the outputs) has a gradient that is zero
# but for rounding. Its rounding error follows the size of the terms, which the tensor's own
# largest element does not bound, but the backward's other gradients do. So a difference below
# this fraction of the dtype's relative tolerance, taken of the model's largest gradient element,
# is rounding. Measured (fixtures/dp604, 4 chunks of 2, float32): such gradients differ by 2e-5
# here and by more than 1e-4 (the absolute tolerance) with another build of torch, while the
# model's largest gradient element is 392 to 759; a hazard changes a gradient by far more.
_GRADIENT_NOISE = 1e-2


def _tolerance(a: torch.Tensor, b: torch.Tensor, computed_in: torch.dtype | None) -> tuple[float, float]:
    """(atol, rtol) of the least precise of the two tensors' dtypes and ``computed_in``."""
    return max(_LOW_PRECISION.get(dtype, (_ATOL, _RTOL)) for dtype in (a.dtype, b.dtype, computed_in))


def _close(a: torch.Tensor, b: torch.Tensor, computed_in: torch.dtype | None = None, summed: bool = False,
           largest: float = 0.0) -> bool:
    """Equal within the tolerance of the least precise of the two dtypes and ``computed_in``
    (the dtype the forward computed in: float32 gradients of an autocast bfloat16 forward carry
    bfloat16's rounding).

    ``summed``: each element is a sum over the batch (a parameter's gradient), which one device
    accumulates in one order and DataParallel in another (each replica its chunk, then the
    replicas' sums added). The rounding error of a float sum is proportional to the magnitude of
    its terms, not of the result: an element whose terms cancel keeps the absolute error of the
    large terms, which an element-wise relative tolerance does not allow for. The tensor's largest
    element bounds those terms from below, so the absolute tolerance scales with it (rtol times
    it). Measured on a resnet18 in training mode at batch 3 (chunks 2 and 1): float32 gives
    `conv1.weight` gradients that differ by 5.5e-5 of the tensor's largest element (about 900
    units of float32 rounding, amplified through 20 BatchNorm backwards, layer4's normalising 4
    values per channel on the one-sample chunk), float64 by 1e-13: rounding, not DataParallel. A
    hazard that changes gradients (a chunk weighted wrongly, state lost) changes them by far more
    than 1e-3 of their scale. ``largest``: the largest gradient element of the whole model (see
    _GRADIENT_NOISE), for ``summed``."""
    atol, rtol = _tolerance(a, b, computed_in)
    a, b = a.detach().cpu().float(), b.detach().cpu().float()
    if a.shape == b.shape and a.numel() and float((a - b).abs().max()) <= atol:
        # Every element within atol, which allclose allows whatever rtol and the scale add: three
        # ops where allclose takes a dozen (0.1 ms on a 4x4 tensor). A NaN or an infinity makes the
        # maximum NaN or too large, and allclose decides.
        return True
    if summed and a.numel():
        scale = float(a.abs().nan_to_num(posinf=0.0, neginf=0.0).max())
        atol = max(atol, rtol * scale, rtol * _GRADIENT_NOISE * largest)
    return torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True)


@record
class RunReport:
    backend: str
    devices: int
    batches: list[int] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # why a batch could not be compared
    reference_failures: list[Observation] = field(default_factory=list)
    # The batch sizes at which both runs happened and were compared (a DataParallel run
    # that raised where the single-device one did not counts: that is a difference).
    compared: list[int] = field(default_factory=list)
    # The classes (MRO up to nn.Module) of every module in the model that ran: its observations
    # are evidence only for findings in these classes.
    classes: list[str] = field(default_factory=list)
    # forward's parameter names, in order (positional arguments are named by them), and the
    # classes whose forward that is (the model's class and its bases): they receive the scattered
    # arguments.
    parameters: list[str] = field(default_factory=list)
    scattered_to: list[str] = field(default_factory=list)
    mode: str = ""  # "training" or "eval": the mode the example's model was in, and ran in
    # Every mode that ran: the example's, then "eval" when the eval pass ran after training.
    modes: list[str] = field(default_factory=list)
    # What happened in the eval pass that is no verdict: it could not build or run (the
    # training verdicts stand).
    notes: list[str] = field(default_factory=list)
    owner_classes: dict = field(default_factory=dict, repr=False)  # module path -> its classes (in the child)
    stochastic: bool = False  # the outputs are random (values and gradients not compared)
    scratch: dict = field(default_factory=dict, repr=False)  # attribute path -> per-call scratch (probed once)

    def as_dict(self) -> dict:
        return {"backend": self.backend, "devices": self.devices, "batches": list(self.batches),
                "compared": list(self.compared), "classes": list(self.classes), "parameters": list(self.parameters),
                "scattered_to": list(self.scattered_to), "mode": self.mode, "modes": list(self.modes),
                "notes": list(self.notes),
                "observations": [o.to_dict() for o in self.observations], "errors": list(self.errors),
                "reference_failures": [o.to_dict() for o in self.reference_failures]}

    @classmethod
    def from_dict(cls, data: dict) -> RunReport:
        return cls(str(data["backend"]), int(data["devices"]), [int(b) for b in data["batches"]],
                   [Observation.from_dict(o) for o in data["observations"]], [str(e) for e in data["errors"]],
                   [Observation.from_dict(o) for o in data["reference_failures"]],
                   [int(b) for b in data.get("compared", [])], [str(c) for c in data.get("classes", [])],
                   [str(p) for p in data.get("parameters", [])], [str(c) for c in data.get("scattered_to", [])],
                   str(data.get("mode", "")), [str(m) for m in data.get("modes", [])],
                   [str(n) for n in data.get("notes", [])])


# --- backends ---------------------------------------------------------------------------


def _host_generator_states() -> list:
    import random
    states = [random.getstate()]
    numpy = sys.modules.get("numpy")  # not imported: the model drew nothing from it
    if numpy is not None:
        kind, keys, position, has_gauss, gauss = numpy.random.get_state()
        states.append((kind, keys.tobytes(), position, has_gauss, gauss))
    return states


def _same_states(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True


def _deepcopy(obj, delegated: list | None = None):
    """``copy.deepcopy(obj)``, made faster for models: a module of a plain class (see
    _plain_module_class) is copied by _copy_module, and each plain tensor and empty hook dict
    directly (see _copy_plain_tensor, _copy_value); the memo keeps any sharing as deepcopy would.
    ``delegated``: where given, gets the type of each value left to deepcopy's generic path or
    holding a function or weak reference (see _copy_value), except an object whose copy is new, of no
    kind _refers_to looks into, and made no module or tensor; while it stays empty, the copy is made
    of new containers, modules and tensors, immutable values and such objects, and _refers_to would
    find nothing in it that reaches ``obj``."""
    delegated = [] if delegated is None else delegated
    memo: dict[int, Any] = {}
    if isinstance(obj, torch.nn.Module) and _plain_module(obj):
        return _copy_module(obj, memo, delegated)
    delegated.append(type(obj))
    if isinstance(obj, torch.nn.Module):
        _copy_tensors_and_empty_dicts(obj, memo)
    return copy.deepcopy(obj, memo)


def _copy_tensors_and_empty_dicts(model: torch.nn.Module, memo: dict) -> None:
    """Put in deepcopy's ``memo`` the copy of each plain tensor (see _copy_plain_tensor) and of each
    empty hook dict of ``model``'s modules, before ``copy.deepcopy`` copies the rest: an empty
    OrderedDict goes through ``__reduce_ex__`` and ``_reconstruct`` (a dozen per module), half the
    time of copying a small model."""
    for module in model.modules():
        for value in vars(module).values():
            if type(value) in (dict, collections.OrderedDict) and not value:
                memo[id(value)] = type(value)()
            elif type(value) is torch.Tensor:
                _copy_plain_tensor(value, memo)
        for buffer in module._buffers.values():
            if type(buffer) is torch.Tensor:
                _copy_plain_tensor(buffer, memo)


_MISSING = object()
# Module classes copy.deepcopy copies as every module (see _plain_module_class).
_plain_module_classes: dict[type, bool] = {}


def _plain_module_class(cls: type) -> bool:
    """Does ``copy.deepcopy`` copy instances of ``cls`` the way it copies every nn.Module:
    ``cls.__new__(cls)``, then its ``__setstate__`` with a deep copy of ``nn.Module.__getstate__``'s
    dict? Not where the class has its own ``__deepcopy__``, reduce, ``__getstate__`` or
    constructor-argument protocol, or a copyreg entry."""
    plain = _plain_module_classes.get(cls)
    if plain is None:
        module = torch.nn.Module
        plain = _plain_module_classes[cls] = (
            issubclass(cls, module) and not issubclass(cls, (type, list, dict)) and cls not in copy._deepcopy_dispatch
            and getattr(cls, "__deepcopy__", None) is None and cls not in copyreg.dispatch_table
            and cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
            and cls.__getstate__ is module.__getstate__
            and not hasattr(cls, "__getnewargs_ex__") and not hasattr(cls, "__getnewargs__"))
    return plain


# Names deepcopy looks up on the instance (an attribute of the instance's own would come first).
_COPY_PROTOCOL = frozenset({"__deepcopy__", "__reduce_ex__", "__reduce__", "__getstate__"})


def _plain_module(module: torch.nn.Module) -> bool:
    """A module of a plain class (see _plain_module_class) with none of deepcopy's protocol
    methods set on the instance itself."""
    return _plain_module_class(type(module)) and _COPY_PROTOCOL.isdisjoint(module.__dict__)


def _copy_module(module: torch.nn.Module, memo: dict, delegated: list) -> torch.nn.Module:
    """``copy.deepcopy(module, memo)`` for a plain module (see _plain_module):
    deepcopy's own steps without its generic reduce protocol (a new instance, in the memo before
    its state is copied; the state, without ``_compiled_call_impl`` as ``nn.Module.__getstate__``
    leaves it out, copied value by value; then ``__setstate__``). deepcopy went through
    ``__reduce_ex__`` and ``_reconstruct`` for every module and every non-empty OrderedDict, and
    through its dispatch for every attribute: two thirds of the time of copying a small model."""
    cls = type(module)
    new = cls.__new__(cls)
    memo[id(module)] = new
    state = {}
    for key, value in module.__dict__.items():
        kind = type(value)
        if key == "_compiled_call_impl":
            continue
        if kind in _INERT_ATOMS:  # most attributes: never in the memo, shared as they are
            state[key] = value
        elif kind is collections.OrderedDict and not value and id(value) not in memo and not vars(value):
            state[key] = memo[id(value)] = collections.OrderedDict()  # an empty hook dict
        else:
            state[key] = _copy_value(value, memo, delegated)
    new.__setstate__(state)
    return new


# The types of most module attributes that copy.deepcopy shares as they are (copy._deepcopy_atomic).
_INERT_ATOMS = frozenset({type(None), bool, int, float, str})


def _inert(value) -> bool:
    """An immutable value that copy.deepcopy shares (copy._deepcopy_atomic) and through which nothing
    can reach the original model: not a function (its closure may hold the model) or a weak
    reference. An enum member too: Enum.__deepcopy__ returns the member itself."""
    cls = type(value)
    if isinstance(value, enum.Enum):
        return getattr(cls, "__deepcopy__", None) is enum.Enum.__deepcopy__
    return copy._deepcopy_dispatch.get(cls) is copy._deepcopy_atomic and cls not in (types.FunctionType, weakref.ref)


def _copy_value(value, memo: dict, delegated: list):
    """``copy.deepcopy(value, memo)``, with what modules hold most copied directly: immutable values,
    dicts and OrderedDicts, sets of immutable values, plain tensors and parameters whose attributes
    are immutable values, modules of plain classes. Anything else goes to deepcopy, its type to
    ``delegated``."""
    found = memo.get(id(value), _MISSING)
    if found is not _MISSING:
        return found
    cls = type(value)
    if cls is torch.nn.Parameter and not vars(value):
        # Most of a model's tensors: Parameter.__deepcopy__'s copy (a parameter of a clone of its data,
        # its requires_grad kept; no gradient, hooks or attributes) made without deepcopy's dispatch.
        if value._backward_hooks:
            delegated.append(cls)
        new = memo[id(value)] = torch.nn.Parameter(value.data.clone(memory_format=torch.preserve_format),
                                                   value.requires_grad)
        return new
    if copy._deepcopy_dispatch.get(cls) is copy._deepcopy_atomic or isinstance(value, enum.Enum) and _inert(value):
        if not _inert(value) and not (cls is types.FunctionType and value.__closure__ is None):
            # (A function reaches what its closure holds, as _refers_to looks: one without a closure,
            # such as an activation function held as an attribute, reaches nothing.)
            delegated.append(cls)
        return value
    if cls is dict or cls is collections.OrderedDict and not vars(value):
        # deepcopy's steps for a dict (and, through OrderedDict's reduce, for an OrderedDict without
        # instance attributes): the new one in the memo first, then each key and value.
        new = cls()
        memo[id(value)] = new
        for key, item in value.items():  # (a key is a name, mostly: deepcopy shares a string as it is)
            new[key if type(key) is str else _copy_value(key, memo, delegated)] = _copy_value(item, memo, delegated)
        return new
    if cls is list:
        new = []  # deepcopy's steps for a list
        memo[id(value)] = new
        for item in value:
            new.append(_copy_value(item, memo, delegated))
        return new
    if cls is tuple and all(_inert(item) for item in value):
        return value  # deepcopy returns a tuple whose items it shares as it is (and memoizes nothing)
    if cls is set and all(_inert(item) for item in value):
        new = set(value)  # deepcopy rebuilds a set from a deep copy of its items: the same items here
        memo[id(value)] = new
        return new
    if cls is torch.Tensor or cls is torch.nn.Parameter:
        # A plain tensor made by _copy_plain_tensor, or a parameter (Parameter.__deepcopy__ makes a
        # new one from a clone of its data), is new; its attributes and hooks need looking into.
        if cls is torch.Tensor:
            _copy_plain_tensor(value, memo)
        if (cls is torch.Tensor and id(value) not in memo or value._backward_hooks
                or not all(_inert(item) for item in vars(value).values())):
            delegated.append(cls)
        return memo[id(value)] if id(value) in memo else copy.deepcopy(value, memo)
    if isinstance(value, torch.nn.Module) and _plain_module(value):
        return _copy_module(value, memo, delegated)
    if isinstance(value, torch.nn.Module):
        delegated.append(cls)
        _copy_tensors_and_empty_dicts(value, memo)
        return copy.deepcopy(value, memo)
    made = len(memo)
    copied = copy.deepcopy(value, memo)
    if copied is value or _looked_into(copied) or any(
            isinstance(new, (torch.nn.Module, torch.Tensor))
            for new in itertools.islice(reversed(memo.values()), len(memo) - made)):
        delegated.append(cls)
    # Else a new object of another kind (a transformers config), with no module or tensor made for it:
    # the check that a copy reaches its original (_refers_to) finds nothing through such an object
    # (it compares it with the original's modules, tensors and containers and does not look inside).
    return copied


def _looked_into(value) -> bool:
    """Is ``value`` of a kind the check that a copy reaches its original (_refers_to) looks into or
    could find among the original's objects: a container, a function, method, partial or weak
    reference, a module, a tensor?"""
    return isinstance(value, _LOOKED_INTO) or type(value).__name__ == "deque"


_LOOKED_INTO = (dict, list, tuple, set, frozenset, bytearray, weakref.ref, types.MethodType, functools.partial,
                types.FunctionType, torch.nn.Module, torch.Tensor)


def _copy_plain_tensor(tensor: torch.Tensor, memo: dict) -> None:
    """Put in deepcopy's ``memo`` the copy ``Tensor.__deepcopy__`` makes of a plain dense leaf
    tensor (a buffer, a tensor attribute), made directly: its storage cloned through the same
    per-storage memo, so tensors that share storage still share it in the copy, and its attributes
    (the emulation's device tag) deep-copied. ``Tensor.__deepcopy__`` goes through TypedStorage's
    Python wrappers: 0.1 ms a buffer, ten times a clone (resnet18's 60 BatchNorm buffers: 6 ms a
    copy). Anything else (a subclass, a view with a graph, a gradient, a quantized, sparse,
    conjugated or negated tensor) is left to deepcopy."""
    if (id(tensor) in memo or not tensor.is_leaf or tensor.layout != torch.strided or tensor.is_quantized
            or tensor.device.type not in ("cpu", "cuda") or tensor.is_conj() or tensor.is_neg()
            or tensor.grad is not None):
        return
    storage = tensor.untyped_storage()
    storages = memo.setdefault("torch", {})  # UntypedStorage.__deepcopy__'s memo
    copied = storages.get(storage._cdata)
    if copied is None:
        copied = storages[storage._cdata] = storage.clone()
    with torch.no_grad():
        new = tensor.new_empty([])
        new.set_(copied, tensor.storage_offset(), tensor.size(), tensor.stride())
    if tensor.requires_grad:
        new.requires_grad_()
    new.__dict__ = copy.deepcopy(tensor.__dict__, memo)
    memo[id(tensor)] = new


def _only_tensors_and_constants(obj, depth: int = 0) -> bool:
    """Only plain tensors, None, numbers and strings, in lists, tuples and dicts."""
    if type(obj) is torch.Tensor or obj is None or isinstance(obj, (bool, int, float, str)):
        return True
    if depth < 8 and type(obj) in (list, tuple, dict):
        return all(_only_tensors_and_constants(o, depth + 1) for o in (obj.values() if type(obj) is dict else obj))
    return False


class Backend:
    name = "?"

    def __init__(self, n_devices: int):
        self.n = n_devices

    def context(self):
        raise NotImplementedError

    def place_module(self, module, device):
        raise NotImplementedError

    def place(self, obj, device):
        raise NotImplementedError

    def dataparallel(self, module, args, kwargs, record):
        raise NotImplementedError

    def copy(self, obj, delegated: list | None = None):
        """A deep copy of ``obj`` (a model not yet placed, the example's arguments); ``delegated``:
        see _deepcopy."""
        return _deepcopy(obj, delegated)

    def placing_copies(self, *arguments) -> bool:
        """Does ``place`` give the model a copy of everything in ``arguments``, so that no run can
        change them (then the eval pass can reuse them without a copy)?"""
        return False

    def seed(self, value: int) -> None:
        """Seed every generator the models' tensors draw from."""
        torch.manual_seed(value)

    def generator_states(self) -> list:
        """The state of every generator a model's forward may draw from: the ones ``seed`` seeds,
        Python's ``random`` and NumPy's global one. A random draw moves one of them."""
        states = [torch.default_generator.get_state()]
        if torch.cuda.is_available():
            states.extend(torch.cuda.get_rng_state_all())
        return [*states, *_host_generator_states()]

    def untagged(self):
        """A block of the harness's own tensor reads (snapshots) that need no device emulation."""
        return contextlib.nullcontext()

    def reset_memory(self):
        pass

    def memory_imbalance(self) -> str | None:
        return None


class EmulatedBackend(Backend):
    name = "emulated"

    def context(self):
        from dpcheck.harness import emulation
        return emulation.emulated_cuda(self.n)

    def place_module(self, module, device):
        from dpcheck.harness import emulation
        return emulation.place_module(module, device)

    def place(self, obj, device):
        from dpcheck.harness import emulation
        return emulation.place(obj, device)

    def copy(self, obj, delegated: list | None = None):
        # Outside the tagging mode, even when called inside it: every tensor op of a copy made under
        # the mode goes through its Python hook (Faster R-CNN: 6.8 s against 0.02 s). Plain tensors
        # keep their device tag (Tensor.__deepcopy__ copies __dict__); parameters lose it, and get
        # it back from place_module.
        from dpcheck.harness import emulation
        with emulation.outside_mode():
            return _deepcopy(obj, delegated)

    def seed(self, value: int) -> None:
        # The CPU generator and the emulated devices' own (seeded alike, as torch.manual_seed
        # seeds every GPU's), not torch.manual_seed: that also seeds CUDA, XPU and MTIA, which
        # under the emulation's "available" CUDA queues a lazy call with a formatted stack each
        # time (1-2 ms a seed, several seeds a model).
        from dpcheck.harness import emulation
        torch.default_generator.manual_seed(value)
        emulation.seed_devices(value)

    def generator_states(self) -> list:
        from dpcheck.harness import emulation
        return [torch.default_generator.get_state(), *emulation.device_generator_states(), *_host_generator_states()]

    def placing_copies(self, *arguments) -> bool:
        # emulation.place clones every tensor and rebuilds every list, tuple and dict; anything else
        # (an object the model could change) is passed as it is.
        return _only_tensors_and_constants(arguments)

    def untagged(self):
        # Outside the tagging mode: its Python hook on every tensor op of a snapshot (summing each
        # buffer and tensor attribute) cost BERT 0.1 s per run; the sums are the same without it.
        from dpcheck.harness import emulation
        return emulation.outside_mode()

    def dataparallel(self, module, args, kwargs, record):
        from dpcheck.harness import emulation as em
        devices = list(range(self.n))
        inputs, kw = em.scatter_kwargs(args, kwargs, devices, 0)
        record(inputs, kw)
        replicas = em.replicate(module, devices[:len(inputs)])
        outputs = em.parallel_apply(replicas, inputs, kw, devices[:len(inputs)])
        return em.gather(outputs, 0, 0)


class CudaBackend(Backend):
    name = "cuda"

    def reset_memory(self):
        self._base = []
        for d in range(self.n):
            torch.cuda.reset_peak_memory_stats(d)
            self._base.append(torch.cuda.memory_allocated(d))

    def memory_imbalance(self) -> str | None:
        """Device 0's growth during the DataParallel step against the largest other device's."""
        grown = [torch.cuda.max_memory_allocated(d) - base for d, base in enumerate(self._base)]
        others = max(grown[1:]) if len(grown) > 1 else 0
        if grown[0] > 2 * others and grown[0] - others > 256 * 2**20:
            mib = ", ".join(f"cuda:{d} +{g / 2**20:.0f} MiB" for d, g in enumerate(grown))
            return f"peak memory growth during the DataParallel step: {mib}"
        return None

    def context(self):
        # Native kernels instead of cuDNN: deterministic, and RNN backward works in eval() mode
        # (cuDNN's refuses), which the comparison needs.
        return torch.backends.cudnn.flags(enabled=False)

    def place_module(self, module, device):
        return module.cuda(device)

    def place(self, obj, device):
        from torch.nn.utils.rnn import PackedSequence
        if isinstance(obj, (torch.Tensor, PackedSequence)):
            return obj.to(f"cuda:{device}")  # a PackedSequence keeps batch_sizes on the CPU
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return type(obj)(*(self.place(o, device) for o in obj))
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.place(o, device) for o in obj)
        if isinstance(obj, dict):
            return type(obj)((k, self.place(v, device)) for k, v in obj.items())
        return obj

    def dataparallel(self, module, args, kwargs, record):
        from torch.nn.parallel import gather, parallel_apply, replicate
        from torch.nn.parallel.scatter_gather import scatter_kwargs
        devices = list(range(self.n))
        inputs, kw = scatter_kwargs(args, kwargs, devices, 0)
        record(inputs, kw)
        replicas = replicate(module, devices[:len(inputs)])
        with _replica_threads_in_order():
            outputs = parallel_apply(replicas, inputs, kw, devices[:len(inputs)])
        return gather(outputs, 0, 0)


class _InOrderThread(threading.Thread):
    """A thread that has finished when `start()` returns."""

    def start(self):
        super().start()
        self.join()


@contextlib.contextmanager
def _replica_threads_in_order():
    """torch's own parallel_apply, its replica threads run one after another (as the emulation
    runs them, see emulation.parallel_apply): what one replica leaves in shared state is there
    when the next runs, every run, instead of as the threads' timing falls."""
    import importlib
    import types
    module = importlib.import_module("torch.nn.parallel.parallel_apply")
    saved = module.threading
    module.threading = types.SimpleNamespace(Thread=_InOrderThread, Lock=threading.Lock)
    try:
        yield
    finally:
        module.threading = saved


def make_backend(name: str, devices: int | None) -> Backend:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() and torch.cuda.device_count() >= 2 else "emulated"
    if name == "cuda":
        available = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if available < 2:
            raise RuntimeError(f"the cuda backend needs at least 2 GPUs; this machine has {available}")
        return CudaBackend(min(devices or available, available))
    return EmulatedBackend(devices or 2)


# --- state snapshots ----------------------------------------------------------------------


def _describe(value: Any, depth: int = 0) -> Any:
    if isinstance(value, torch.Tensor):
        data = value.detach()
        if data.is_floating_point() or data.is_complex():
            total = float(data.double().sum()) if data.numel() else 0.0
        else:
            total = float(data.long().sum()) if data.numel() else 0.0
        return ("tensor", tuple(value.shape), round(total, 4) if math.isfinite(total) else str(total))
    if isinstance(value, (list, tuple, set, dict)) or type(value).__name__ == "deque":
        items = list(value.values()) if isinstance(value, dict) else list(value)
        inner = [_describe(v, depth + 1) for v in items[:4]] if depth < 2 else []
        return ("container", type(value).__name__, len(value), inner)
    if isinstance(value, (int, float, str, bool, type(None))):
        return ("value", repr(value)[:80])
    if isinstance(value, torch.nn.Module):
        return ("module", type(value).__name__)
    return ("object", type(value).__name__)


# Module attributes that are not state a snapshot describes.
_NOT_STATE = _MODULE_INTERNALS | {"training"}


def snapshot(model: torch.nn.Module) -> dict[str, Any]:
    """Each module's attributes (not functions or methods), buffers and submodule count, described
    (see _describe), by path. Keys in no particular order: every reader compares by key."""
    state: dict[str, Any] = {}
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        attributes = module.__dict__
        # The attributes set beyond nn.Module's own (a set difference, where most of a module's two
        # dozen attributes are nn.Module's: with describing sizes and flags directly, a snapshot takes a
        # fifth to a quarter less time: BERT's 465 -> 363 us).
        for key in attributes.keys() - _NOT_STATE:
            value = attributes[key]
            if type(value) in _INERT_ATOMS:  # most attributes: sizes, flags, names (what _describe makes of them)
                state[prefix + key] = ("value", repr(value)[:80])
            elif not callable(value) or isinstance(value, (torch.Tensor, torch.nn.Module)):
                state[prefix + key] = _describe(value)
        buffers = module._buffers
        if buffers:
            # Per-replica statistics in training mode: measured apart (see _per_chunk_batchnorm).
            per_replica = module.training and isinstance(module, _BatchNorm)
            for key, buf in buffers.items():
                if per_replica and key in _BATCHNORM_STATS:
                    continue
                state[prefix + key] = ("buffer",) + tuple(_describe(buf)[1:]) if buf is not None else None
        state[prefix + "<submodules>"] = ("value", str(len(module._modules)))
    return state


def _show(desc: Any) -> str:
    if desc is None:
        return "missing"
    kind = desc[0]
    if kind == "value":
        return desc[1]
    if kind in ("tensor", "buffer"):
        return f"a tensor of shape {tuple(desc[1])} summing to {desc[2]}"
    if kind == "container":
        return f"a {desc[1]} of {desc[2]} item{'s' if desc[2] != 1 else ''}"
    return f"a {desc[1]}"


# --- running ------------------------------------------------------------------------------


def _reduce(output: Any, scalars: frozenset[int] = frozenset()) -> torch.Tensor | None:
    """What a training step backpropagates: the sum of every differentiable output, except that
    a leaf at a position in ``scalars`` (0-dim in the single-device run: a loss) is averaged, as
    trainers do with the vector of per-replica losses DataParallel gathers (`loss.mean()`)."""
    from torch.utils._pytree import tree_flatten
    parts = [t.float().mean() if i in scalars else t.float().sum() for i, t in enumerate(tree_flatten(output)[0])
             if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point())]
    return sum(parts) if parts else None


def _chunk_sizes(batch: int, n: int) -> list[int]:
    """The sizes of the chunks scatter cuts a batch of ``batch`` into for ``n`` devices, as
    ``Tensor.chunk`` cuts them (ceil(batch / n) each, the last smaller; fewer than ``n`` chunks
    when the batch is small), computed without a tensor op under the emulation's mode."""
    size = -(-batch // n)
    return [min(size, batch - start) for start in range(0, batch, size)] if batch > 0 else [0] * n


def _scalar_positions(output: Any) -> frozenset[int]:
    from torch.utils._pytree import tree_flatten
    return frozenset(i for i, t in enumerate(tree_flatten(output)[0]) if isinstance(t, torch.Tensor) and t.dim() == 0)


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor | None]:
    # Not cloned: nothing accumulates into them afterwards (the runs after the steps are under
    # no_grad, and the loss-weight probe sets the gradients to None before its backward). Not
    # detached either: a `.grad` has no graph, and each detach under the emulation's mode costs a
    # Python hook (BERT: 0.09 s a run).
    return {name: p.grad for name, p in model.named_parameters()}


def _model_line(exc: BaseException, model_file: str | None) -> int | None:
    """The last line of the model file in the exception's traceback (replica tracebacks too)."""
    if model_file is None:
        return None
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if _same_file(f.filename, model_file)]
    text = str(exc)
    if not lines and "Original Traceback" in text:  # re-raised from a replica thread
        for match in re.finditer(r'File "([^"]+)", line (\d+)', text):
            if _same_file(match.group(1), model_file):
                lines.append(int(match.group(2)))
    return lines[-1] if lines else None


def _same_file(a: str, b: str) -> bool:
    import os
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


def _first_line(exc: BaseException) -> str:
    """The error in one line; for errors re-raised from a replica, the replica's own error."""
    text = str(exc).strip().splitlines()
    if text and "Original Traceback" in str(exc):
        original = [line for line in text if line.strip() and not line.startswith(" ")][-1]
        return f"{original.strip()} ({text[0].replace('Caught ', 'caught ').rstrip('.')})"[:300]
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def run_model(build: Callable[[int], tuple], backend: Backend, batch_sizes: list[int],
              model_file: str | None = None) -> RunReport:
    """Compare single-device and DataParallel runs of ``build(batch_size)`` for each batch size."""
    report = RunReport(backend.name, backend.n)
    raised: dict[int, bool] = {}
    arguments: dict[int, tuple] = {}  # batch size -> the example's (args, kwargs) at that size
    unrun: dict[int, tuple] = {}  # batch size -> a copy of the example not run yet, for the eval pass
    # The backend's context once for the model (each batch's steps enter it again at no cost):
    # entering the emulation patches torch.cuda, cuDNN and autocast and pushes the tagging mode.
    with backend.context():
        for batch in batch_sizes:
            before = len(report.observations)
            ok = _run_batch(build, backend, batch, model_file, report, arguments, unrun)
            if ok is not None:
                report.compared.append(batch)
            raised[batch] = ok is False and any(o.raised for o in report.observations[before:])
        first = batch_sizes[0]
        if first in raised and not raised[first]:
            # Runs at a batch divisible by N, raises at an uneven or smaller one. (A failed gather is
            # about the output, whatever the batch: it is not marked.)
            report.observations = [
                replace(o, evidence=f"{o.evidence} (batch {first} ran)", details={**o.details, "first_batch_ran": first})
                if o.raised and o.batch != first and o.kind != K.GATHER_FAILED else o
                for o in report.observations]
        with backend.untagged():
            _argument_observations(arguments, backend, report)
        report.observations = [replace(o, mode=o.mode or report.mode) for o in report.observations]
        report.modes = [report.mode] if report.mode else []
        if report.mode == "training" and report.compared:
            _eval_pass(build, backend, model_file, report, unrun.get(_eval_batch(backend)))
    return report


def _eval_batch(backend: Backend) -> int:
    return 2 * backend.n


def _eval_pass(build, backend, model_file, report: RunReport, unrun: tuple | None = None) -> None:
    """One more comparison, in eval mode, at batch 2N, after a training-mode run that compared:
    code under ``if not self.training:`` runs too. Its observations the training run did not
    already make join the report, marked "(in eval mode)"; when it cannot build or its
    single-device run fails, that is a note, and the training verdicts stand. No randomness or
    loss-weight probes (eval has no dropout; the training run measured the model's randomness).
    ``unrun``: the example at that batch as the training run built it, copied before it ran (then
    it is not built again)."""
    batch = _eval_batch(backend)
    extra = RunReport(backend.name, backend.n, classes=report.classes, parameters=report.parameters,
                      scattered_to=report.scattered_to, mode="eval", owner_classes=report.owner_classes,
                      stochastic=report.stochastic, scratch=_scratch_for_eval(report.scratch))
    extra.batches.append(batch)
    try:
        outcome = _run_batch_inner(build, backend, batch, model_file, extra, {}, eval_pass=True, built=unrun)
    except Exception as exc:  # noqa: BLE001 - the eval pass costs its own result only
        outcome, extra.errors = None, [*extra.errors, f"batch {batch} could not be compared: {_first_line(exc)}"]
    report.modes.append("eval")
    report.notes.extend(f"eval pass: {e}" for e in extra.errors)
    report.notes.extend(f"eval pass at batch {batch}: the model {o.evidence}" for o in extra.reference_failures)
    if outcome is None:
        return
    seen = {(o.kind, o.line, o.attr, o.output_path) for o in report.observations}
    report.observations.extend(
        replace(o, mode="eval", evidence=f"{o.evidence} (in eval mode)") for o in extra.observations
        if (o.kind, o.line, o.attr, o.output_path) not in seen)


def _scratch_for_eval(training: dict) -> dict:
    """The training run's scratch verdicts (attribute path -> per-call scratch) the eval pass can
    keep. An attribute forward reads before writing is carried between calls whatever the mode.
    One it wrote first in training mode is probed again: `if self.training:` may be the branch that
    resets it, and eval mode's branch add to what the last call left (the training verdict would
    hide that state lost with the replica)."""
    return {key: False for key, scratch in training.items() if not scratch}


def _run_batch(build, backend, batch, model_file, report, arguments, unrun) -> bool | None:
    """Returns True if the DataParallel run matched, False if it failed or differed, None if not comparable."""
    report.batches.append(batch)
    try:
        return _run_batch_inner(build, backend, batch, model_file, report, arguments, unrun=unrun)
    except Exception as exc:  # anything the steps below did not expect: this batch is not comparable
        report.errors.append(f"batch {batch} could not be compared: {_first_line(exc)}")
        return None


def _run_batch_inner(build, backend, batch, model_file, report, arguments, eval_pass=False, built=None,
                     unrun=None) -> bool | None:
    """``eval_pass``: both models run in eval mode (see _eval_pass), without the randomness and
    loss-weight probes. ``built``: (model, args, kwargs, random state) to run instead of building
    the example. ``unrun``: where to keep a copy of a training-mode example at the eval pass's
    batch before it runs, for that pass."""
    with backend.context(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if built is None:
                backend.seed(0)
                with tracing():
                    ref_model, args, kwargs = _normalise(build(batch))
                # Before any copy is made: copies keep what it set (a walk of every module's attributes).
                _neutralise_randomness(ref_model)
            else:
                ref_model, args, kwargs, random_state = built
                torch.random.set_rng_state(random_state)  # as the build left it
            if unrun is not None and batch == _eval_batch(backend) and ref_model.training:
                kept = _faithful_copy(ref_model, backend)
                with contextlib.suppress(Exception):  # arguments deepcopy cannot copy: the pass builds again
                    if kept is not None:
                        example = (args, kwargs) if backend.placing_copies(args, kwargs) else backend.copy((args, kwargs))
                        unrun[batch] = (kept, *example, torch.random.get_rng_state())
            dp_model = _second_model(ref_model, build, batch, backend)
            if eval_pass:
                ref_model.eval()
                dp_model.eval()
        except Exception as exc:  # the user's constructor or example failed
            report.errors.append(f"building the model at batch {batch} failed: {_first_line(exc)}")
            return None
        arguments[batch] = (args, kwargs)
        if not report.classes:
            report.owner_classes = _owners(ref_model)
            report.classes = sorted({c for classes in report.owner_classes.values() for c in classes})
            report.parameters = _parameter_names(ref_model)
            report.scattered_to = report.owner_classes.get("", [])
        # The mode the example returned (training by default, as nn.Module starts): what a
        # training step under DataParallel runs, `if self.training:` branches included.
        report.mode = report.mode or ("training" if ref_model.training else "eval")
        chunks = _chunk_sizes(batch, backend.n)
        for m in (ref_model, dp_model):
            backend.place_module(m, 0)
        batchnorm = _per_chunk_batchnorm(ref_model, chunks)
        probe_randomness = batch == report.batches[0] and not eval_pass
        backend.seed(_STEP_SEED)
        with backend.untagged():
            before = snapshot(ref_model)
            generators_before = backend.generator_states() if probe_randomness else None

        # Reference: everything on device 0, no replication (placing the arguments draws nothing).
        ref_args, ref_kwargs = backend.place(args, 0), backend.place(kwargs, 0)
        try:
            _IN_REFERENCE.set()
            with tracing():
                ref_out = ref_model(*ref_args, **ref_kwargs)
                loss = _reduce(ref_out)
                if loss is not None:
                    loss.backward()
            _IN_REFERENCE.clear()
        except Exception as exc:
            _IN_REFERENCE.clear()
            kind = K.DEVICE_MISMATCH if "same device" in str(exc) else K.REFERENCE_FAILED
            obs = Observation(kind, f"fails on a single device too: {_first_line(exc)}",
                              line=_model_line(exc, model_file), batch=batch,
                              details={"exception": type(exc).__name__})
            report.reference_failures.append(obs)
            return None
        # Randomness is the model's, not the batch size's: probed once, at the first batch, on the
        # single-device model itself when its forward changed no state, else on a third model as
        # built (the DataParallel one has not run yet).
        with backend.untagged():
            ref_state, ref_grads = snapshot(ref_model), _grads(ref_model)
            drew_nothing = probe_randomness and _same_states(generators_before, backend.generator_states())
        if drew_nothing:
            # The step drew nothing from any generator: a run with another seed gives the same
            # outputs, so the probe below (one more forward) would find nothing.
            report.stochastic = False
        elif probe_randomness:
            probe_model = ref_model if ref_state == before else None
            if probe_model is None:
                try:
                    probe_model = _second_model(dp_model, build, batch, backend)
                except Exception:  # noqa: BLE001 - it built once already; not probed then
                    probe_model = None
            with tracing():
                report.stochastic = probe_model is not None and _stochastic(
                    probe_model, (args, kwargs), backend, ref_out, chunks, fresh=probe_model is not ref_model)
        stochastic = report.stochastic

        scattered: dict[str, Any] = {}

        def record(inputs, kw):
            scattered["inputs"], scattered["kwargs"] = inputs, kw

        dp_args, dp_kwargs = backend.place(args, 0), backend.place(kwargs, 0)
        shared_before = {id(t) for _, _, _, t in _shared_container_tensors(dp_model)}
        # Device 0's extra memory grows with the batch: measured once, at the training run's first
        # and largest batch (default_batch_sizes), where it shows if anywhere. Reading the peak
        # statistics of every GPU at every batch cost a small model a tenth of its harness time.
        measure_memory = batch == report.batches[0] and not eval_pass
        if measure_memory:
            backend.reset_memory()
        scalars = _scalar_positions(ref_out)
        backend.seed(_STEP_SEED)
        try:
            _UNDER_DATAPARALLEL.set()
            with tracing():
                dp_out = backend.dataparallel(dp_model, tuple(dp_args), dict(dp_kwargs), record)
                loss = _reduce(dp_out, scalars)
                # Kept to probe the loss's weighting below, when a loss is averaged over uneven chunks.
                probe = bool(scalars) and len(set(chunks)) > 1 and loss is not None and not eval_pass
                if loss is not None:
                    loss.backward(retain_graph=probe)
        except Exception as exc:
            _UNDER_DATAPARALLEL.clear()
            symptom = _dp_exception(exc, model_file, batch, backend)
            cause = _foreign_shared_tensor(dp_model, shared_before, exc, symptom, batch, backend, len(chunks))
            if cause is not None:
                report.observations.append(cause)
                symptom = replace(symptom, details={**symptom.details, "cause": {
                    "kind": cause.kind.value, "path": cause.details["path"]}})
            report.observations.append(symptom)
            _keyword_chunks(kwargs, scattered, batch, report)
            return False
        _UNDER_DATAPARALLEL.clear()
        with backend.untagged():
            dp_state, dp_grads = snapshot(dp_model), _grads(dp_model)
        lost = [key for key in ref_state if not key.endswith("<submodules>") and ref_state[key] != before.get(key)
                and dp_state.get(key) == before.get(key) and (ref_state[key] or ("",))[0] != "buffer"]
        # Whether forward writes an attribute before reading it is its code's, not the batch size's:
        # probed once per attribute (one more forward), at the first batch that lost it.
        unprobed = [key for key in lost if key not in report.scratch]
        if unprobed:
            # The probe's forward may add in place to a tensor the step returned (`self.total +=
            # ...; return self.total`): the outputs are compared as the step returned them.
            ref_out = _leaves_copied(ref_out)
            with tracing():
                found = _scratch_each_call(ref_model, unprobed, args, kwargs, backend)
            report.scratch.update({key: key in found for key in unprobed})
        scratch = {key for key in lost if report.scratch[key]}
        imbalance = backend.memory_imbalance() if measure_memory else None
        if imbalance:
            report.observations.append(Observation(K.MEMORY_IMBALANCE, imbalance, batch=batch))
        gather_warned = any("all input tensors were scalars" in str(w.message) for w in caught)

    # Comparing reads tensors the model no longer uses: outside the tagging mode, whose Python hook
    # each op would pay (run_model holds the backend's context across the batches).
    with backend.untagged():
        found = len(report.observations)
        _keyword_chunks(kwargs, scattered, batch, report)
        _compare_outputs(ref_out, dp_out, batch, backend, report, gather_warned, compare_values=not stochastic)
        _compare_state(before, ref_state, dp_state, batch, backend, report, ref_model, scratch)
        if not stochastic:
            before_grads = len(report.observations)
            _compare_grads(ref_grads, dp_grads, batch, backend, report, _computed_in(ref_out))
            if probe and len(report.observations) > before_grads:
                with tracing():
                    _probe_loss_weights(dp_model, dp_out, scalars, chunks, ref_grads, _computed_in(ref_out), batch,
                                        report, before_grads)
        elif batch == report.batches[0] and not eval_pass:
            report.errors.append(f"the outputs are random in {report.mode} mode even with dropout off (two "
                                 "single-device runs with different seeds differ): values and gradients were not compared")
        matched = len(report.observations) == found
        if batch == report.batches[0]:
            _batchnorm_observations(batchnorm, chunks, batch, report)  # evidence, not a difference
    return matched


def _second_model(model: torch.nn.Module, build, batch: int, backend: Backend) -> torch.nn.Module:
    """Another model exactly as ``build(batch)`` gave ``model`` (not run yet), its randomness
    neutralised as ``model``'s is: a deep copy, made outside the emulation's mode, where that copy
    shares nothing with ``model`` (else a second build from the same seed, with the random number
    generator left as the first build left it)."""
    copied = _faithful_copy(model, backend)
    if copied is not None:
        return copied
    state = torch.random.get_rng_state()
    try:
        backend.seed(0)
        with tracing():
            built = _normalise(build(batch))[0]
        _neutralise_randomness(built)
        return built
    finally:
        torch.random.set_rng_state(state)


def _faithful_copy(model: torch.nn.Module, backend: Backend) -> torch.nn.Module | None:
    """A deep copy of ``model`` (made outside the emulation's mode) that shares nothing with it,
    or None where deepcopy fails or the copy would still reach the original."""
    with contextlib.suppress(Exception):  # an attribute deepcopy cannot copy
        delegated: list[type] = []
        copied = backend.copy(model, delegated)
        if not delegated:
            return copied  # new modules, containers and tensors and immutable values: nothing reaches the original
        with backend.untagged():  # each tensor's `_backward_hooks` read would pay the mode's hook
            if not _refers_to(copied, model):
                return copied
    return None


def _refers_to(copied: torch.nn.Module, original: torch.nn.Module) -> bool:
    """Does the copy still reach the original's modules, tensors or mutable attributes? deepcopy
    keeps functions as they are, so a hook or a stored lambda whose closure holds the original (or
    a container of it), a partial or a weak reference to it, would make the copy write into the
    original where a second build would not."""
    owned: set[int] = set()  # what forward could change in place (deepcopy shares immutable values as they are)

    def own() -> None:  # once, where a value that could be one of them is met
        for module in original.modules():
            owned.add(id(module))
            for key, value in vars(module).items():
                if key not in _MODULE_INTERNALS and (isinstance(value, (torch.Tensor, list, dict, set, bytearray))
                                                     or type(value).__name__ == "deque"):
                    owned.add(id(value))
            owned.update(id(t) for t in (*module._parameters.values(), *module._buffers.values()) if t is not None)

    def reaches(obj, depth: int) -> bool:
        if type(obj) in _INERT_ATOMS:
            return False  # never one of the original's objects, and holds nothing
        if not owned:
            own()
        if id(obj) in owned:
            return True
        if depth > 3 or isinstance(obj, (str, bytes, int, float, bool, type(None), torch.Tensor)):
            return False
        if isinstance(obj, weakref.ref):
            return reaches(obj(), depth + 1)
        if isinstance(obj, types.MethodType):
            return reaches(obj.__self__, depth + 1)
        if isinstance(obj, functools.partial):
            return any(reaches(o, depth + 1) for o in (obj.func, *obj.args, *obj.keywords.values()))
        if isinstance(obj, types.FunctionType):
            return any(reaches(cell.cell_contents, depth + 1) for cell in obj.__closure__ or ()
                       if _cell_filled(cell))
        if isinstance(obj, dict):
            return any(reaches(v, depth + 1) for v in list(obj.values()))
        if isinstance(obj, (list, tuple, set, frozenset)) or type(obj).__name__ == "deque":
            return any(reaches(v, depth + 1) for v in list(obj))
        return False

    for module in copied.modules():
        for key, value in vars(module).items():
            # (an empty container holds nothing: most of nn.Module's hook dicts; nor does an atom)
            if type(value) in _INERT_ATOMS or isinstance(value, (dict, list, tuple, set)) and not value:
                continue
            if key not in ("_parameters", "_buffers", "_modules") and reaches(value, 0):
                return True
        for tensor in (*module._parameters.values(), *module._buffers.values()):
            hooks = getattr(tensor, "_backward_hooks", None)
            if hooks and reaches(hooks, 0):
                return True
    return False


def _cell_filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def _probe_loss_weights(model, dp_out, scalars, chunks, ref_grads, computed_in, batch, report, index) -> None:
    """The gradients differ and a 0-dim loss was averaged over uneven chunks: backpropagate the
    per-replica losses weighted by their chunk sizes instead. If the gradients then match, the
    difference is the equal weighting of `loss.mean()`, evidence about the loss, not a separate one."""
    from torch.utils._pytree import tree_flatten

    leaves = tree_flatten(dp_out)[0]
    weights = torch.tensor(chunks, dtype=torch.float32) / sum(chunks)
    losses = [i for i in scalars if i < len(leaves) and isinstance(leaves[i], torch.Tensor)
              and leaves[i].dim() == 1 and leaves[i].shape[0] == len(chunks)]
    if not losses:
        return
    parts = [(leaves[i].float() * weights.to(leaves[i].device)).sum() if i in losses else leaves[i].float().sum()
             for i in range(len(leaves)) if isinstance(leaves[i], torch.Tensor) and leaves[i].requires_grad
             and leaves[i].is_floating_point() and (i in losses or i not in scalars)]
    parts += [leaves[i].float().mean() for i in scalars if i not in losses and i < len(leaves)
              and isinstance(leaves[i], torch.Tensor) and leaves[i].requires_grad]
    model.zero_grad(set_to_none=True)
    try:
        sum(parts).backward()
    except RuntimeError:
        return
    weighted = RunReport(report.backend, report.devices)
    _compare_grads(ref_grads, _grads(model), batch, None, weighted, computed_in)
    if weighted.observations:
        return  # still different: the gradient difference stands on its own
    paths = [path for path, leaf in _leaves(dp_out) if any(leaf is leaves[i] for i in losses)] or ["output"]
    parameter = report.observations[index].details.get("parameter")
    report.observations[index] = Observation(
        K.LOSS_MEAN_WEIGHTS_CHUNKS_EQUALLY,
        f"{paths[0]} comes back as one loss per replica; averaging them (`loss.mean()`) weights the uneven "
        f"chunks {tuple(chunks)} of batch {batch} equally, so the gradient of `{parameter}` differs from the "
        "single-device run (weighted by chunk size it matches)", output_path=paths[0], batch=batch,
        details={"parameter": parameter, "chunks": list(chunks)})


_BATCHNORM_STATS = frozenset({"running_mean", "running_var", "num_batches_tracked"})


def _neutralise_randomness(model: torch.nn.Module) -> None:
    """Dropout and friends off, the same way in every run: a training-mode forward is then as
    deterministic as an eval one (dropout layers get p=0; float attributes named like a drop
    probability, such as an RNN's or attention's `dropout`, a DropPath's `drop_prob`, are set to 0)."""
    from torch.nn.modules.dropout import _DropoutNd
    for module in model.modules():
        if isinstance(module, _DropoutNd):
            module.p = 0.0
        for key, value in vars(module).items():
            if isinstance(value, float) and not isinstance(value, bool) and 0 < value < 1 and "drop" in key.lower():
                setattr(module, key, 0.0)


def _per_chunk_batchnorm(model: torch.nn.Module, chunks: list[int]) -> dict[str, tuple[str, float]]:
    """In training mode, make each BatchNorm of the single-device run normalise the chunks
    DataParallel gives its replicas, each with its own statistics (so the comparison shows the
    other hazards), and measure how far each chunk's statistics are from the whole batch's.
    Returns {module path: (owner path, largest difference of a chunk's mean)}, filled by the forward."""
    measured: dict[str, tuple[str, float]] = {}
    if len(chunks) < 2:
        return measured
    for path, module in model.named_modules():
        if not isinstance(module, _BatchNorm) or not module.training:
            continue
        module.forward = _chunked(module.forward, path, chunks, measured)
    return measured


def _chunked(forward, path, chunks, measured):
    total = sum(chunks)

    def per_chunk(x, *args, **kwargs):
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[0] % total:
            return forward(x, *args, **kwargs)
        scale = x.shape[0] // total  # (B * T, C) flattened batch-major
        parts = x.split([c * scale for c in chunks])
        if path not in measured:
            dims = [0, *range(2, x.dim())]
            with torch.no_grad():
                whole = x.float().mean(dims)
                gap = max(float((p.float().mean(dims) - whole).abs().max()) for p in parts)
            measured[path] = (path.rpartition(".")[0], gap)
        try:
            return torch.cat([forward(p, *args, **kwargs) for p in parts])
        except (RuntimeError, ValueError):  # a chunk too small to normalise: DataParallel's replica will say
            return forward(x, *args, **kwargs)
    return per_chunk


def _batchnorm_observations(measured, chunks, batch, report) -> None:
    """One observation per class that owns BatchNorm layers: per-replica statistics (DP evidence)."""
    if not measured:
        return
    owners: dict[str, list[tuple[str, float]]] = {}
    for path, (owner, gap) in measured.items():
        owners.setdefault(owner, []).append((path, gap))
    classes_of = report.owner_classes
    for owner, layers in owners.items():
        path, gap = max(layers, key=lambda item: item[1])
        classes = classes_of.get(owner, [])
        more = f" (and {len(layers) - 1} more BatchNorm layers)" if len(layers) > 1 else ""
        report.observations.append(Observation(
            K.BATCHNORM_STATS_PER_REPLICA,
            f"in training mode each replica's BatchNorm normalises only its own chunk {tuple(chunks)} of batch "
            f"{batch}: `{path}`'s per-chunk means differ from the whole batch's by up to {gap:.3g}{more}; "
            "only replica 0's running statistics are kept",
            batch=batch, class_name=classes[0] if classes else None,
            details={"path": path, "classes": classes, "layers": len(layers)}))


def _stochastic(model, inputs, backend, ref_out, chunks, fresh=True) -> bool:
    """Does a second single-device run (the same inputs) with another seed give different outputs?
    ``fresh``: ``model`` is a new build (else the single-device model, already prepared)."""
    try:
        args, kwargs = inputs
        if fresh:
            backend.place_module(model, 0)
            _neutralise_randomness(model)
            _per_chunk_batchnorm(model, chunks)
        backend.seed(12345)
        with torch.no_grad():
            again = model(*backend.place(args, 0), **backend.place(kwargs, 0))
    except Exception:
        return False
    for (_, a), (_, b) in zip(_leaves(ref_out), _leaves(again)):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
                and a.is_floating_point() and not _close(a, b):
            return True
    return False


def _normalise(built) -> tuple[torch.nn.Module, tuple, dict]:
    if not isinstance(built, tuple) or len(built) not in (2, 3):
        raise TypeError("dpcheck_example must return (model, args) or (model, args, kwargs)")
    model, args = built[0], built[1]
    kwargs = built[2] if len(built) == 3 else {}
    if not isinstance(args, (tuple, list)):
        args = (args,)
    return model, tuple(args), dict(kwargs or {})


def _dp_exception(exc, model_file, batch, backend) -> Observation:
    line = _model_line(exc, model_file)
    text = _first_line(exc)
    where = ""
    message = str(exc)
    gather = line is None and any(word in message for word in (
        "Gather", "gather", "not iterable", "same number of keys", "invalid shape", "number of dimensions",
        "zip()", "KeyError"))
    details: dict[str, Any] = {"exception": type(exc).__name__}
    if "PackedSequence" in text or "batch_sizes" in text:  # the error itself, not the traceback's source
        details["mentions_packed_sequence"] = True
    if "number of kwargs_tup" in message or "missing" in message and "positional argument" in message:
        return Observation(K.KEYWORD_CHUNK_MISMATCH, f"DataParallel run on {backend.n} devices raised {text}",
                           line=line, batch=batch, details=details)
    kind = K.GATHER_FAILED if gather else K.DEVICE_MISMATCH if "same device" in message else K.EXCEPTION_AT_LINE
    return Observation(kind, f"DataParallel run on {backend.n} devices at batch {batch} raised "
                       f"{text}{where}; the single-device run did not", line=line, batch=batch, details=details)


def _shared_container_tensors(model: torch.nn.Module):
    """(module path, attribute, where inside it, tensor) for each tensor held in a list, tuple, dict,
    set or deque attribute of a module: a replica's `__dict__` is a shallow copy of the original's,
    so every replica reads and writes these very containers."""
    def walk(obj, where, depth):
        if isinstance(obj, torch.Tensor):
            yield where, obj
        elif depth < 3 and isinstance(obj, dict):
            for key, value in list(obj.items()):
                yield from walk(value, f"{where}[{key!r}]", depth + 1)
        elif depth < 3 and (isinstance(obj, (list, tuple, set)) or type(obj).__name__ == "deque"):
            for index, value in enumerate(list(obj)):
                yield from walk(value, f"{where}[{index}]", depth + 1)

    for path, module in model.named_modules():
        for key, value in list(vars(module).items()):
            if type(value) in _INERT_ATOMS or key in _MODULE_INTERNALS or isinstance(value, (torch.Tensor, torch.nn.Module)):
                continue  # (most attributes are sizes, flags and names: looked at first)
            if isinstance(value, (list, tuple, dict, set)) or type(value).__name__ == "deque":
                for where, tensor in walk(value, key, 0):
                    yield path, key, where, tensor


def _foreign_shared_tensor(model, before: set[int], exc, symptom, batch, backend, replicas) -> Observation | None:
    """A shared container's entry read on another device, watched directly: the DataParallel step
    raised a device mismatch in one replica, and a container shared by every replica holds a tensor
    stored during the step on another replica's device (the entry one replica built, read by another).
    The mismatch is then this observation's symptom (the caller links them)."""
    if symptom.kind != K.DEVICE_MISMATCH or replicas < 2:
        return None
    where = re.search(r"in replica (\d+) on device (\d+)", str(exc))
    raised_on = int(where.group(2)) if where else None
    owners = _owners(model)
    for path, attr, inside, tensor in _shared_container_tensors(model):
        if id(tensor) in before:
            continue  # there before the step (built with the model): not a replica's write
        device = tensor.device
        if device.type != "cuda" or device.index is None or device.index == raised_on:
            continue
        classes = owners.get(path, [])
        full = f"{path}.{attr}" if path else attr
        reader = f"the replica on cuda:{raised_on}" if raised_on is not None else "another replica"
        container = type(getattr(model.get_submodule(path), attr)).__name__
        return Observation(
            K.SHARED_CONTAINER_TENSOR_ON_OTHER_DEVICE,
            f"`{full}` is a {container} every replica shares; during the DataParallel step on {backend.n} devices "
            f"a replica stored `{inside}`, a tensor of shape {tuple(tensor.shape)} on {device}, and {reader} "
            f"read it: at batch {batch} it raised {_first_line(exc)}",
            attr=attr, batch=batch, class_name=classes[0] if classes else None, line=None,
            details={"path": full, "classes": classes, "device": str(device), "raised_at": symptom.line})
    return None


def _keyword_chunks(kwargs, scattered, batch, report):
    inputs, kw = scattered.get("inputs"), scattered.get("kwargs")
    if inputs is not None and kwargs and kw is not None:
        empty = [i for i, k in enumerate(kw) if not k]
        if len(inputs) != len(kw) or empty:
            what = f"replica(s) {empty} got none of them" if empty else "the replica counts disagree"
            report.observations.append(Observation(
                K.KEYWORD_CHUNK_MISMATCH, f"keyword arguments were split into {sum(1 for k in kw if k)} chunk(s) "
                f"but the positional ones into {len(inputs)}: {what}", batch=batch))


def _argument_observations(arguments: dict[int, tuple], backend, report):
    """How DataParallel scatters each argument, against what scales with the batch size.

    With the example built at two or more batch sizes, which dims (and list lengths) scale
    is measured; with one (the Python API), dim 0 of the first tensor is taken as the batch."""
    if not arguments:
        return
    sizes = sorted(arguments)
    batch = sizes[-1]  # evidence at the largest batch the example was built for
    args, kwargs = arguments[batch]
    others = [arguments[b] for b in sizes[:-1]]
    if not others:
        from torch.utils._pytree import tree_flatten
        first = next((t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and t.dim() > 0),
                     None)
        guess = first.shape[0] if first is not None else batch
    else:
        guess = None
    for position, arg in enumerate(args):
        same = [o[0][position] if position < len(o[0]) else None for o in others]
        name = report.parameters[position] if position < len(report.parameters) else None
        _check_argument(f"argument {position}", name, arg, same, guess, batch, backend, report)
    for key, value in kwargs.items():
        same = [o[1].get(key) for o in others]
        _check_argument(f"keyword argument `{key}`", key, value, same, guess, batch, backend, report)


def _scales(value, others, guess) -> bool:
    """Does dim 0 (a tensor) or the length (a list) of ``value`` change with the batch size?
    ``others``: the same argument at other batch sizes; ``guess``: the batch, when not measured."""
    def size(v):
        if isinstance(v, torch.Tensor):
            return v.shape[0] if v.dim() else None
        return len(v) if isinstance(v, (list, tuple)) else None
    if guess is not None:
        return size(value) == guess
    return any(size(o) is not None and size(o) != size(value) for o in others)


def _check_argument(label, keyword, arg, others, guess, batch, backend, report):
    from torch.nn.utils.rnn import PackedSequence

    def observe(kind, evidence):
        report.observations.append(Observation(kind, evidence, argument=keyword, batch=batch, details={
            "argument": label}))

    measured = "" if guess is not None else " (its size does not change with the example's batch size)"
    if isinstance(arg, PackedSequence):
        observe(K.ARGUMENT_PACKED_SEQUENCE_SPLIT, f"{label} is a PackedSequence: DataParallel chunks its data, "
                "batch_sizes and sorted_indices fields independently")
        return
    if isinstance(arg, torch.Tensor):
        if arg.dim() == 0:
            observe(K.ARGUMENT_ZERO_DIM, f"{label} is a 0-dim tensor, which DataParallel cannot scatter")
        elif not _scales(arg, others, guess):
            observe(K.ARGUMENT_NOT_BATCH_SPLIT, f"{label} has shape {tuple(arg.shape)}: dim 0 ({arg.shape[0]}) is "
                    f"not the batch{measured}, but DataParallel splits it across {backend.n} devices anyway")
    elif isinstance(arg, (list, tuple)) and arg and any(isinstance(leaf, torch.Tensor) for _, leaf in _leaves(arg)):
        # scatter recurses into lists, tuples and dicts at any depth and chunks every tensor it
        # finds along its own dim 0 (torch.nn.parallel.scatter_gather.scatter_map): a container
        # holding tensors is split element by element, never passed whole.
        all_tensors = all(isinstance(a, torch.Tensor) for a in arg)
        if not hasattr(arg, "_fields") and _scales(arg, others, guess):
            split = ("tensors, one per sample: DataParallel splits each element along its own dim 0"
                     if all_tensors else
                     "elements holding tensors, one per sample: DataParallel splits the tensors inside each element "
                     "along their own dim 0")
            observe(K.ARGUMENT_LIST_SPLIT_PER_ELEMENT, f"{label} is a {type(arg).__name__} of {len(arg)} {split} "
                    "instead of splitting the list")
            return
        # A tuple of batch-major tensors is scattered correctly; one whose elements' dim 0 is not
        # the batch is not.
        for index, element in enumerate(arg):
            if not isinstance(element, torch.Tensor):
                continue
            same = [o[index] for o in others if isinstance(o, (list, tuple)) and index < len(o)]
            if element.dim() == 0 or not _scales(element, same, guess):
                observe(K.ARGUMENT_LIST_SPLIT_PER_ELEMENT, f"{label} is a {type(arg).__name__} of {len(arg)} "
                        f"{'tensors' if all_tensors else 'elements'} whose element {index} has shape "
                        f"{tuple(element.shape)}: DataParallel splits it "
                        f"along dim 0, which is not the batch{measured}")
                return
    elif (not isinstance(arg, (torch.Tensor, type(None), bool, int, float, str, dict, tuple, list))) or (
            isinstance(arg, (list, tuple)) and not hasattr(arg, "_fields") and _scales(arg, others, guess)):
        # Per-sample data with no tensor anywhere inside (a list of lengths, strings, a numpy
        # array, an object): scatter gives every replica the same reference.
        size = f" of length {len(arg)}" if hasattr(arg, "__len__") else ""
        observe(K.ARGUMENT_NOT_SPLIT, f"{label} is a {type(arg).__name__}{size}: DataParallel passes it whole "
                "to every replica instead of splitting it")


def _leaves(obj, path="output"):
    if isinstance(obj, torch.Tensor) or obj is None or isinstance(obj, (int, float, str, bool)):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, f"{path}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, obj


def _leaves_copied(obj):
    """``obj`` with each tensor ``_leaves`` reaches detached and cloned (lists, tuples and dicts
    rebuilt plain: ``_leaves`` names their items the same way), other leaves as they are."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _leaves_copied(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_leaves_copied(v) for v in obj] if isinstance(obj, list) else tuple(_leaves_copied(v) for v in obj)
    return obj


def _compare_outputs(ref, dp, batch, backend, report, gather_warned, compare_values=True):
    ref_leaves, dp_leaves = dict(_leaves(ref)), dict(_leaves(dp))
    if set(ref_leaves) != set(dp_leaves):
        report.observations.append(Observation(
            K.OUTPUT_STRUCTURE_DIFFERS, f"the output structure differs: single device {sorted(ref_leaves)}, "
            f"DataParallel {sorted(dp_leaves)}", batch=batch))
        return
    for path, r in ref_leaves.items():
        d = dp_leaves[path]
        if isinstance(r, torch.Tensor) and isinstance(d, torch.Tensor):
            if r.dim() == 0 and d.dim() == 1 and d.shape[0] > 1:
                report.observations.append(Observation(
                    K.SCALAR_OUTPUT_GATHERED, f"{path} is a 0-dim tensor on one device but DataParallel on "
                    f"{backend.n} devices returned shape {tuple(d.shape)} (one value per replica)",
                    output_path=path, batch=batch))
            elif r.shape != d.shape:
                report.observations.append(Observation(
                    K.SCALAR_OUTPUT_SHAPE_DIFFERS if r.dim() == 0 else K.OUTPUT_SHAPE_DIFFERS,
                    f"{path} has shape {tuple(r.shape)} on one device but {tuple(d.shape)} under DataParallel "
                    f"(batch {batch})", output_path=path, batch=batch))
            elif not compare_values:
                continue
            elif r.is_floating_point() and not (_identical(r, d) or _close(r, d)):
                diff = float((r.detach().cpu().float() - d.detach().cpu().float()).abs().max())
                report.observations.append(Observation(
                    K.VALUES_DIFFER, f"{path} differs from the single-device run by up to {diff:.3g} (same shape "
                    f"{tuple(r.shape)})", output_path=path, batch=batch))
            elif not r.is_floating_point() and not torch.equal(r.detach().cpu(), d.detach().cpu()):
                report.observations.append(Observation(
                    K.INTEGER_VALUES_DIFFER, f"{path} differs from the single-device run (integer values)",
                    output_path=path, batch=batch))
        elif type(r) is not type(d) or (not isinstance(r, torch.Tensor) and r != d):
            report.observations.append(Observation(
                K.OUTPUT_VALUE_DIFFERS, f"{path} is {r!r:.60} on one device but {d!r:.60} under DataParallel",
                output_path=path, batch=batch))


def _identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same dtype, device and values: one op where `_close` takes several (an output computed
    row by row, as most are, comes back from the replicas bit for bit)."""
    return a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)


# Attributes through which inspect.signature finds a function's signature elsewhere than in its code.
_SIGNATURE_ATTRIBUTES = ("__wrapped__", "__signature__", "_partialmethod", "__partialmethod__")


def _parameter_names(model: torch.nn.Module) -> list[str]:
    """forward's positional parameter names (those a positional argument can bind to)."""
    import inspect
    forward = model.forward
    function = getattr(forward, "__func__", None)
    if (type(forward) is types.MethodType and type(function) is types.FunctionType
            and not any(hasattr(function, name) for name in _SIGNATURE_ATTRIBUTES)):
        # What inspect.signature finds for a method defined with def (its code's positional
        # parameters, the first one bound), without building a Signature (0.06 ms).
        code = function.__code__
        return list(code.co_varnames[1:code.co_argcount])
    try:
        parameters = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _owners(model: torch.nn.Module) -> dict[str, list[str]]:
    """Submodule path -> the class names of that submodule (its MRO up to nn.Module): state
    observations say whose attribute differed, so they confirm findings in that class only."""
    owners = {}
    for name, module in model.named_modules():
        mro = type(module).__mro__
        owners[name] = [c.__name__ for c in mro[:mro.index(torch.nn.Module)]] if torch.nn.Module in mro else []
    return owners


def _scratch_each_call(model, keys, args, kwargs, backend) -> set[str]:
    """Of the attributes (snapshot keys) the single-device step set and the DataParallel step left
    unchanged on the model (a replica wrote them), those that are per-call scratch: in one more
    single-device call, forward writes each before reading it and then reads it back itself
    (`self._setup_cache(...)` then `self.conv_state`). The value the previous call left is never
    read, so nothing is lost with the replica. A counter (read, then written) and a stash
    (written, never read by forward: kept for the caller) are not scratch.

    The reads and writes are recorded by giving each owning module, for that call only, a subclass
    of its own class whose `__getattribute__`/`__setattr__` note the first use of those names."""
    names: dict[str, set[str]] = {}
    for key in keys:
        path, _, attr = key.rpartition(".")
        names.setdefault(path, set()).add(attr)
    events: dict[tuple[str, str], list[str]] = {}
    swapped = []
    try:
        for path, watched in names.items():
            module = model.get_submodule(path)
            cls = type(module)
            module.__class__ = _recording_class(cls, path, frozenset(watched), events)
            swapped.append((module, cls))
        _IN_REFERENCE.set()
        with torch.no_grad():
            model(*backend.place(args, 0), **backend.place(kwargs, 0))
    except Exception:  # noqa: BLE001 - not probed: the attributes are compared as they are
        return set()
    finally:
        _IN_REFERENCE.clear()
        for module, cls in swapped:
            module.__class__ = cls
    return {f"{path}.{attr}" if path else attr for (path, attr), seen in events.items()
            if seen[0] == "write" and "read" in seen[1:]}


def _recording_class(cls, path, watched, events):
    def __getattribute__(self, name):
        if name in watched:
            _note(events, (path, name), "read")
        return cls.__getattribute__(self, name)

    def __setattr__(self, name, value):
        if name in watched:
            _note(events, (path, name), "write")
        cls.__setattr__(self, name, value)

    return type(cls.__name__, (cls,), {"__getattribute__": __getattribute__, "__setattr__": __setattr__,
                                       "__module__": cls.__module__, "__qualname__": cls.__qualname__})


def _note(events, key, event) -> None:
    seen = events.setdefault(key, [])
    if len(seen) < 2 or event not in seen[1:]:  # the first event, and whether a read followed it
        seen.append(event)


def _compare_state(before, ref, dp, batch, backend, report, model=None, scratch=frozenset()):
    """``model``: the single-device model after its step, whose classes own each attribute (read
    only where something differed)."""
    owners = None
    for key in sorted(set(before) | set(ref) | set(dp)):
        b, r, d = before.get(key), ref.get(key), dp.get(key)
        if r == b or r == d or key in scratch:
            continue
        attr = key.rsplit(".", 1)[-1]
        if any(word in attr.lower() for word in ("cache", "memo")):
            continue  # caches (often keyed by device) legitimately differ under DataParallel
        where = f"`{key}`"
        if key.endswith("<submodules>"):
            report.observations.append(Observation(
                K.SUBMODULES_NOT_KEPT, f"the single-device run added submodules ({_show(b)} -> {_show(r)}) but "
                f"after DataParallel the model still has {_show(d)}", batch=batch, details={"path": key}))
            continue
        if d == b:
            kind = K.STATE_LOST_ON_REPLICA
            evidence = (f"after one DataParallel forward on {backend.n} devices, {where} is {_show(d)} on the "
                        f"model and {_show(r)} in the single-device run")
        elif r and d and r[0] == "container" and d[0] == "container":
            kind = K.STATE_MUTATED_PER_REPLICA
            evidence = (f"after one forward, {where} is {_show(r)} in the single-device run and "
                        f"{_show(d)} under DataParallel on {backend.n} devices (mutated once per replica)")
        else:
            kind = K.STATE_DIFFERS
            evidence = (f"after one forward, {where} is {_show(r)} in the single-device run but {_show(d)} "
                        f"under DataParallel on {backend.n} devices")
        if owners is None:
            owners = _owners(model) if model is not None else {}
        classes = owners.get(key.rpartition(".")[0], [])
        report.observations.append(Observation(kind, evidence, attr=attr, batch=batch,
                                               class_name=classes[0] if classes else None,
                                               details={"path": key, "classes": classes}))


def _computed_in(output) -> torch.dtype | None:
    """The least precise floating-point dtype among the output's tensors (None: none is)."""
    dtypes = {leaf.dtype for _, leaf in _leaves(output) if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()}
    return max(dtypes, key=lambda d: _LOW_PRECISION.get(d, (_ATOL, _RTOL)), default=None)


def _all_close_summed(pairs, computed_in) -> tuple[bool, float]:
    """True where every (a, b) pair is certainly `_close(a, b, computed_in, summed=True)`, found
    with a few fused ops over all the pairs instead of several ops per pair (BERT's parameters:
    5 ms a comparison one by one): no element of a - b exceeds the pair's absolute tolerance,
    which is enough. False where that does not show it (mixed tolerances, non-finite values, a
    difference that only the relative tolerance admits): the caller compares pair by pair.
    Also returns the largest finite element of the first tensors (0.0 where not measured)."""
    if not pairs:
        return True, 0.0
    if len({(a.dtype, a.device, b.dtype, b.device) for a, b in pairs}) != 1:
        return False, 0.0  # (one tolerance, then, for every pair: it is the dtypes')
    atol, rtol = _tolerance(*pairs[0], computed_in)
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    with torch.no_grad():  # (no graph, so no detach: an op each)
        # Each tensor's largest element, then each difference's, read back at once: four ops in all
        # (a small model's gradients: a third of the time of comparing the norms as tensors).
        norms = torch.stack(torch._foreach_norm([*a, *torch._foreach_sub(a, b)], float("inf"))).float().tolist()
    scales, differences = norms[:len(a)], norms[len(a):]
    largest = max((scale for scale in scales if math.isfinite(scale)), default=0.0)
    floor = max(atol, rtol * _GRADIENT_NOISE * largest)
    return all(difference <= max(scale * rtol, floor) for scale, difference in zip(scales, differences)), largest


def _compare_grads(ref, dp, batch, backend, report, computed_in=None):
    present = [(r, dp[name]) for name, r in ref.items() if r is not None and dp.get(name) is not None]
    close, largest = False, 0.0
    if len(present) == len(ref) == len(dp) and all(r.shape == d.shape for r, d in present):
        close, largest = _all_close_summed(present, computed_in)
        if close:
            return  # the same as below finds, at once
    if not largest:
        with torch.no_grad():
            largest = max((float(r.detach().abs().nan_to_num(posinf=0.0, neginf=0.0).max())
                           for r in ref.values() if r is not None and r.numel()), default=0.0)
    for name, r in ref.items():
        d = dp.get(name)
        if r is None and d is None:
            continue
        # An unused parameter has no gradient on one device and zeros after DataParallel's broadcast.
        r = r if r is not None else (torch.zeros_like(d) if d is not None and not d.any() else None)
        d = d if d is not None else (torch.zeros_like(r) if r is not None and not r.any() else None)
        if r is None and d is None:
            continue
        if (r is None) != (d is None) or r.shape != d.shape or not _close(r, d, computed_in, summed=True, largest=largest):
            report.observations.append(Observation(
                K.GRADS_DIFFER, f"the gradient of `{name}` differs from the single-device run", batch=batch,
                details={"parameter": name}))
            return  # one is enough evidence


def default_batch_sizes(n: int) -> list[int]:
    """Divisible by N; 2N-1, whose last chunk has one sample; and smaller than N (at least 1).
    Largest first: the first batch is where device 0's memory imbalance is measured."""
    sizes = [2 * n, 2 * n - 1, max(1, n - 1)]
    return list(dict.fromkeys(sizes))


# Set while the DataParallel step runs (replicas run in other threads: an Event, not a local),
# and while the single-device step runs.
_UNDER_DATAPARALLEL = threading.Event()
_IN_REFERENCE = threading.Event()


def trace_lines(model_file: str):
    """A settrace function recording the model file's executed lines (all threads): every
    line that ran, those that ran during a single-device step and during a DataParallel step."""
    import os
    target = os.path.realpath(model_file)
    executed: set[int] = set()
    under_dp: set[int] = set()
    in_reference: set[int] = set()
    cache: dict[str, bool] = {}

    def tracer(frame, event, arg):
        name = frame.f_code.co_filename
        hit = cache.get(name)
        if hit is None:
            hit = cache[name] = os.path.realpath(name) == target
        if not hit:
            return None
        def record(line):
            executed.add(line)
            if _UNDER_DATAPARALLEL.is_set():
                under_dp.add(line)
            elif _IN_REFERENCE.is_set():
                in_reference.add(line)

        record(frame.f_lineno)

        def local(frame, event, arg):
            if event == "line":
                record(frame.f_lineno)
            return local
        return local

    return tracer, executed, under_dp, in_reference


# The model file's line tracer (see trace_lines), once the child installed it.
_line_tracer = None


def install_tracer(tracer):
    """Trace this thread from now on, and every thread started later (replica threads)."""
    global _line_tracer
    _line_tracer = tracer
    sys.settrace(tracer)
    threading.settrace(tracer)


@contextlib.contextmanager
def tracing():
    """The installed line tracer on in this thread for the block, whatever it was before: the
    harness turns it on only where the model's code runs (building the example, the steps and the
    probes that call forward or backward), not while copying, snapshotting and comparing. Tracing
    is global in CPython 3.11: while a trace function is set, every Python frame runs slower, the
    libraries' and dpcheck's own too (--confirm on BERT or the word language model: 0.3 s)."""
    if _line_tracer is None or sys.gettrace() is _line_tracer:
        yield
        return
    previous = sys.gettrace()
    sys.settrace(_line_tracer)
    try:
        yield
    finally:
        sys.settrace(previous)


@contextlib.contextmanager
def untraced_imports(tracer):
    """While it is active, each ``import`` statement runs with this thread's tracer off:
    the tracer records only the model file's lines, yet as a global trace function it is
    called for every frame of the libraries the model file imports, and slows each of them
    (importing transformers: 1.4 s of CPU on top of 2.7 s). The model file's own lines,
    before and after each import, are still recorded."""
    import builtins

    original = builtins.__import__

    def importing(*args, **kwargs):
        if sys.gettrace() is not tracer:
            return original(*args, **kwargs)
        sys.settrace(None)
        try:
            return original(*args, **kwargs)
        finally:
            sys.settrace(tracer)

    builtins.__import__ = importing
    try:
        yield
    finally:
        builtins.__import__ = original
