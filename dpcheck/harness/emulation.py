"""DataParallel on N emulated GPUs, on a CPU-only build of torch.

Two things have to be faithful for the verdicts to match real GPUs:

* **Device placement.** Every tensor carries a virtual device (a tag: -1 for the CPU,
  k for `cuda:k`). A `TorchFunctionMode` entered in each replica thread reads and
  writes the tags: factories with `device="cuda"` (no index), a bare `.cuda()` and
  `torch.cuda.current_device()` resolve to the thread's current device, `"cuda:0"`
  stays `cuda:0`, `x.device` and `x.is_cuda` report the virtual device, and an op that
  mixes devices raises the same `Expected all tensors to be on the same device` error
  real GPUs raise (0-dim CPU tensors may mix, as on CUDA). `torch.cuda.is_available()`
  is true and `device_count()` is N while the model is built and run.
* **Values, state and gradients.** Real CPU replicas built by the same algorithm as
  `torch.nn.parallel.replicate` (`_replicate_for_data_parallel`: shallow `__dict__`
  copy, parameters as non-leaf differentiable copies in `__dict__`, replica 0 sharing the
  original's parameter and buffer storage, other replicas getting copies), the real
  `scatter_kwargs` and `gather` container logic (with their tensor primitives swapped
  for CPU ones that chunk, tag and concatenate like `comm.scatter`/`comm.gather`), and
  a `parallel_apply` that runs replicas in threads (one after another, so shared state
  written by one replica is always seen by the next), propagating grad mode, and re-raises
  with torch's own `ExceptionWrapper`.
* **Random numbers.** Each emulated device draws from a generator of its own, as each GPU has
  its own (`torch.manual_seed` seeds them all alike: replica k's first draw equals replica 0's
  first draw); draws on the CPU share the CPU's one.
* **DataParallel in the model's own code.** `nn.DataParallel` and `nn.parallel.data_parallel`
  called inside the model run torch's own code (its device checks included) over these
  emulated steps.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections import OrderedDict
from typing import Any, Sequence

import torch
from torch.overrides import TorchFunctionMode

TAG = "_dpcheck_device"
_thread = threading.local()

# Property reads reach the mode as fresh `__get__` method-wrappers of these descriptors.
_DEVICE_DESCRIPTOR = torch.Tensor.device
_IS_CUDA_DESCRIPTOR = torch.Tensor.is_cuda
# Ops that legitimately take tensors on different devices.
_MIXING_ALLOWED = {torch.Tensor.copy_, torch.Tensor.__setitem__, torch.Tensor.__getitem__,
                   torch.Tensor.__repr__, torch.Tensor.__format__, torch.Tensor.item, torch.Tensor.tolist,
                   torch.Tensor.__bool__, torch.Tensor.__len__, torch.Tensor.numel, torch.Tensor.size,
                   torch.Tensor.dim}


# Ops that take a CPU lengths / batch_sizes tensor next to GPU data (packed sequences).
_MIXING_ALLOWED_NAMES = frozenset({"_pack_padded_sequence", "_pad_packed_sequence", "pack_padded_sequence",
                                   "pad_packed_sequence", "lstm", "gru", "rnn_tanh", "rnn_relu"})


# Ops that draw from the default generator (named as the tagging mode meets them: torch functions,
# Tensor methods, the functional dropouts and init functions). On an emulated device they draw
# from that device's generator instead of the CPU's.
RANDOM_OPS = frozenset({
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "poisson",
    "bernoulli", "multinomial", "binomial", "_standard_gamma", "_sample_dirichlet", "normal_", "uniform_",
    "random_", "exponential_", "geometric_", "cauchy_", "log_normal_", "bernoulli_", "dropout", "dropout1d",
    "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "feature_dropout", "native_dropout",
    "rrelu", "rrelu_", "gumbel_softmax", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_",
    "xavier_uniform_", "xavier_normal_", "orthogonal_", "sparse_"})
# c10's default_rng_seed_val: every CUDA generator's seed until one is set.
_UNSEEDED = 67280421310721


class _DeviceGenerators:
    """Each emulated device's generator, made on its first draw from the seed the devices were
    last given (one for all, as `torch.cuda.manual_seed_all` gives)."""

    def __init__(self):
        self.seed = _UNSEEDED
        self.made: dict[int, torch.Generator] = {}

    def reseed(self, value: int) -> None:
        self.seed = value
        self.made.clear()

    def of(self, device: int) -> torch.Generator:
        generator = self.made.get(device)
        if generator is None:
            generator = self.made[device] = torch.Generator().manual_seed(self.seed)
        return generator


_generators = _DeviceGenerators()


def seed_devices(value: int) -> None:
    """`torch.cuda.manual_seed_all(value)` on the emulated devices (as `torch.manual_seed` does)."""
    _generators.reseed(value)


def device_generator_states() -> list:
    """The state of every emulated device's generator that has drawn since it was seeded."""
    return [(index, _generators.made[index].get_state()) for index in sorted(_generators.made)]


@contextlib.contextmanager
def _drawing_on(device: int):
    """The CPU generator holds ``device``'s generator's state while active (the draw is a CPU op)."""
    generator = _generators.of(device)
    cpu = torch.default_generator
    saved = cpu.get_state()
    cpu.set_state(generator.get_state())
    try:
        yield
    finally:
        generator.set_state(cpu.get_state())
        cpu.set_state(saved)


def current_device() -> int:
    return getattr(_thread, "device", 0)


def set_current_device(index: int) -> None:
    _thread.device = index


def tag_of(tensor: torch.Tensor) -> int:
    return getattr(tensor, TAG, -1)


def set_tag(tensor: Any, device: int) -> None:
    if isinstance(tensor, torch.Tensor):
        try:
            setattr(tensor, TAG, device)
        except (AttributeError, RuntimeError):  # pragma: no cover - exotic tensor subclasses
            pass


def device_name(index: int) -> str:
    return "cpu" if index < 0 else f"cuda:{index}"


def resolve(device: Any) -> int | None:
    """A virtual device index for a device spec, or None if it is not one we emulate."""
    if device is None:
        return None
    if isinstance(device, torch.device):
        kind, index = device.type, device.index
    elif isinstance(device, str):
        kind, _, rest = device.partition(":")
        index = int(rest) if rest else None
    elif isinstance(device, int) and not isinstance(device, bool):
        return device
    else:
        return None
    if kind == "cpu":
        return -1
    if kind == "cuda":
        return current_device() if index is None else index
    return None


class VirtualDevices(TorchFunctionMode):
    """Tags tensors with virtual CUDA devices and enforces same-device rules."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        owner = getattr(func, "__self__", None)
        if owner is _DEVICE_DESCRIPTOR:
            index = tag_of(args[0])
            return torch.device("cpu") if index < 0 else torch.device("cuda", index)
        if owner is _IS_CUDA_DESCRIPTOR:
            return tag_of(args[0]) >= 0
        if func is torch.Tensor.get_device:
            return tag_of(args[0])
        if func is torch.Tensor.pin_memory:
            return args[0]
        if func is torch.Tensor.cuda:
            spec = args[1] if len(args) > 1 else kwargs.get("device")
            return self._move(args[0], current_device() if spec is None else resolve(spec))
        if func is torch.Tensor.cpu:
            return self._move(args[0], -1)
        if func is torch.Tensor.to:
            return self._to(args, kwargs)
        if func is torch.Tensor.type_as:
            out = func(*args, **kwargs)
            if out is args[0] and tag_of(args[0]) != tag_of(args[1]):
                out = out.clone()
            set_tag(out, tag_of(args[1]))
            return out

        target = None
        if kwargs.get("device") is not None:
            target = resolve(kwargs["device"])
            if target is not None:
                kwargs["device"] = "cpu"
        elif _untagged(args) and _untagged(kwargs.values()):
            # Only CPU tensors and no device asked for (most ops while an example is built): the
            # result is a CPU tensor, which untagged tensors are; nothing to check or tag.
            return func(*args, **kwargs)
        if func not in _MIXING_ALLOWED and getattr(func, "__name__", "") not in _MIXING_ALLOWED_NAMES:
            devices = _devices_of(args, kwargs)
            if len(devices) > 1:
                first, second = sorted(devices, reverse=True)[:2]
                raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                                   f"two devices, {device_name(first)} and {device_name(second)}!")
            source = next(iter(devices)) if devices else _any_tag(args, kwargs)
        else:
            source = _any_tag(args[:1], {})
        tag = target if target is not None else source
        if tag >= 0 and kwargs.get("generator") is None and getattr(func, "__name__", "") in RANDOM_OPS:
            with _drawing_on(tag):
                result = func(*args, **kwargs)
        else:
            result = func(*args, **kwargs)
        if getattr(func, "__name__", "") == "_pack_padded_sequence" and isinstance(result, tuple):
            set_tag(result[0], tag)
            set_tag(result[1], -1)  # batch_sizes is always a CPU tensor
            return result
        for out in _tensors(result) if isinstance(result, (tuple, list)) else [result]:
            if isinstance(out, torch.Tensor) and not (out is args[0] if args else False):
                set_tag(out, tag)
        return result

    def _move(self, tensor: torch.Tensor, target: int | None) -> torch.Tensor:
        if target is None or tag_of(tensor) == target:
            return tensor
        out = tensor.clone()
        set_tag(out, target)
        return out

    def _to(self, args, kwargs):
        tensor, rest = args[0], list(args[1:])
        target = None
        if "device" in kwargs:
            target = resolve(kwargs.pop("device"))
        if rest and isinstance(rest[0], torch.Tensor):  # .to(other)
            other = rest.pop(0)
            target, kwargs["dtype"] = tag_of(other), other.dtype
        elif rest and (isinstance(rest[0], (str, torch.device)) or (
                isinstance(rest[0], int) and not isinstance(rest[0], bool))):
            target = resolve(rest.pop(0))
        out = torch.Tensor.to(tensor, *rest, **kwargs) if (rest or kwargs) else tensor
        if target is not None and target != tag_of(tensor) and out is tensor:
            out = tensor.clone()
        set_tag(out, tag_of(tensor) if target is None else target)
        return out


def _devices_of(args, kwargs) -> set[int]:
    """Devices of the tensor arguments, leaving out 0-dim CPU tensors (CUDA ops accept them)."""
    found = set()
    for leaf in _tensors((args, kwargs)):
        if isinstance(leaf, torch.nn.parameter.UninitializedTensorMixin):
            continue  # a lazy module's parameter before its first forward: no data, no device yet
        tag = tag_of(leaf)
        if tag < 0 and leaf.dim() == 0:
            continue
        found.add(tag)
    return found


def _tensors(obj, depth: int = 0) -> list[torch.Tensor]:
    """The tensors in a torch call's arguments or result (nested tuples, lists and dicts, in order):
    on every op, so a plain walk into a list rather than pytree's general flattening, which cost a
    quarter of a forward, or nested generators (one per element)."""
    found: list[torch.Tensor] = []
    _collect(obj, depth, found)
    return found


def _collect(obj, depth: int, found: list) -> None:
    if isinstance(obj, torch.Tensor):
        found.append(obj)
    elif depth < 8 and isinstance(obj, (tuple, list, dict)):
        for item in obj.values() if isinstance(obj, dict) else obj:
            if isinstance(item, torch.Tensor):
                found.append(item)
            elif isinstance(item, (tuple, list, dict)):
                _collect(item, depth + 1, found)


def _untagged(items, depth: int = 0) -> bool:
    """No tensor in ``items`` (nested tuples, lists and dicts, as :func:`_collect` walks them)
    carries a virtual device: all are CPU tensors."""
    for item in items:
        if isinstance(item, torch.Tensor):
            if getattr(item, TAG, -1) >= 0:
                return False
        elif isinstance(item, (tuple, list, dict)) and depth < 8 and not _untagged(
                item.values() if isinstance(item, dict) else item, depth + 1):
            return False
    return True


def _any_tag(args, kwargs) -> int:
    tags = [tag_of(leaf) for leaf in _tensors((args, kwargs))]
    cuda = [t for t in tags if t >= 0]
    return cuda[0] if cuda else -1


class _DeviceContext:
    """`torch.cuda.device(k)`: switch this thread's current device."""

    def __init__(self, device):
        self.target = resolve(device) if not isinstance(device, int) else device
        self.previous = None

    def __enter__(self):
        self.previous = current_device()
        if self.target is not None and self.target >= 0:
            set_current_device(self.target)
        return self

    def __exit__(self, *exc):
        set_current_device(self.previous)
        return False


@contextlib.contextmanager
def emulated_cuda(n_devices: int):
    """While active: torch.cuda reports N devices, and this thread runs in the tagging mode.
    Inside an active one for the same N (this thread), it changes nothing: the harness enters it
    once per model and each batch's steps enter it again (a second tagging mode on the stack
    would run every op's Python hook twice)."""
    if getattr(_thread, "emulating", None) == n_devices:
        yield
        return
    cuda = torch.cuda
    patches = {
        "is_available": lambda: True,
        "device_count": lambda: n_devices,
        "current_device": current_device,
        "set_device": lambda d: set_current_device(resolve(d) if not isinstance(d, int) else d),
        "device": _DeviceContext,
        "synchronize": lambda *a, **k: None,
        "get_device_name": lambda *a, **k: "dpcheck emulated GPU",
        "memory_allocated": lambda *a, **k: 0,
        "max_memory_allocated": lambda *a, **k: 0,
        "reset_peak_memory_stats": lambda *a, **k: None,
        "empty_cache": lambda: None,
    }
    # On a CUDA build without GPUs, modules would take cuDNN paths for tensors that report
    # is_cuda: keep them on the portable kernels, as a CPU-only build does.
    cudnn = torch.backends.cudnn
    saved_acceptable, saved_enabled = cudnn.is_acceptable, cudnn.enabled
    cudnn.is_acceptable, cudnn.enabled = (lambda tensor: False), False
    # The emulated devices compute with CPU kernels: CUDA autocast (torch.autocast("cuda"),
    # torch.cuda.amp.autocast) becomes CPU autocast with the same dtype.
    autocast = torch.amp.autocast_mode.autocast
    saved_autocast_init = autocast.__init__

    def autocast_init(self, device_type, *args, **kwargs):
        saved_autocast_init(self, "cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    autocast.__init__ = autocast_init
    set_current_device(0)
    outer, _thread.emulating = getattr(_thread, "emulating", None), n_devices
    try:
        with _patched(cuda, patches), _dataparallel_in_model_code(), VirtualDevices():
            yield
    finally:
        _thread.emulating = outer
        cudnn.is_acceptable, cudnn.enabled = saved_acceptable, saved_enabled
        autocast.__init__ = saved_autocast_init


@contextlib.contextmanager
def outside_mode():
    """This thread without the tagging mode (taken off the mode stack and put back after, where it
    is the innermost mode; any mode and tensor subclass hook is off in there)."""
    from torch.overrides import _get_current_function_mode_stack, _pop_mode_temporarily

    stack = _get_current_function_mode_stack()
    popped = _pop_mode_temporarily() if stack and isinstance(stack[-1], VirtualDevices) else contextlib.nullcontext()
    with popped, torch._C.DisableTorchFunction():
        yield


def place_module(module: torch.nn.Module, device: int) -> torch.nn.Module:
    """`module.cuda(device)`: registered parameters and buffers move; plain attributes do not. (Each
    module's own, as `cuda()` walks them: one walk, where parameters() and buffers() take one each.)"""
    for submodule in module.modules():
        for tensor in (*submodule._parameters.values(), *submodule._buffers.values()):
            set_tag(tensor, device)
    return module


def place(obj: Any, device: int) -> Any:
    """Put the example inputs on a device (a tagged copy of each tensor)."""
    if isinstance(obj, torch.Tensor):
        out = obj.detach().clone()
        set_tag(out, device)
        return out
    from torch.nn.utils.rnn import PackedSequence
    if isinstance(obj, PackedSequence):  # batch_sizes always stays on the CPU
        return PackedSequence(place(obj.data, device), obj.batch_sizes,
                              place(obj.sorted_indices, device), place(obj.unsorted_indices, device))
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(place(o, device) for o in obj)
    if isinstance(obj, tuple):  # namedtuple
        return type(obj)(*(place(o, device) for o in obj))
    if isinstance(obj, dict):
        return type(obj)((k, place(v, device)) for k, v in obj.items())
    return obj


# --- the DataParallel steps, on emulated devices ------------------------------------------


def replicate(network: torch.nn.Module, devices: Sequence[int], detach: bool = False) -> list[torch.nn.Module]:
    """torch.nn.parallel.replicate's algorithm with CPU copies tagged per device."""
    if not devices:
        return []
    devices = [_device_index(d) for d in devices]
    params = list(network.parameters())
    param_index = {id(p): i for i, p in enumerate(params)}
    buffers = list(network.buffers())
    buffer_index = {id(b): i for i, b in enumerate(buffers)}
    for tensor in [*params, *buffers]:  # Broadcast's and comm.broadcast_coalesced's checks
        if tag_of(tensor) < 0:
            raise AssertionError("Broadcast function not implemented for CPU tensors")
        if tag_of(tensor) != devices[0]:
            raise RuntimeError(f"All tensors must be on devices[0]: {devices[0]}")
    param_copies, buffer_copies = [], []
    for j, device in enumerate(devices):
        # Replica 0 keeps the original storage (broadcast returns device 0's input as-is).
        if detach:  # replicate(..., detach=True), as DataParallel does under no_grad
            copies = [p.detach() if j == 0 else p.detach().clone() for p in params]
        else:
            copies = [p.view_as(p) if j == 0 else p.clone() for p in params]
        for c in copies:
            set_tag(c, device)
        param_copies.append(copies)
        bufs = [b if j == 0 else (b.clone() if b.requires_grad else b.detach().clone()) for b in buffers]
        if j > 0:  # replica 0's buffers are the original tensors, already on device 0
            for b in bufs:
                set_tag(b, device)
        buffer_copies.append(bufs)
    modules = list(network.modules())
    module_index = {id(m): i for i, m in enumerate(modules)}
    copies = [[m._replicate_for_data_parallel() for m in modules] for _ in devices]
    for replicas in copies:
        for replica in replicas:
            replica._former_parameters = OrderedDict()
    for i, module in enumerate(modules):
        for key, child in module._modules.items():
            for j in range(len(devices)):
                setattr(copies[j][i], key, None if child is None else copies[j][module_index[id(child)]])
        for key, param in module._parameters.items():
            for j in range(len(devices)):
                replica = copies[j][i]
                if param is None:
                    setattr(replica, key, None)
                else:
                    copy = param_copies[j][param_index[id(param)]]
                    setattr(replica, key, copy)
                    replica._former_parameters[key] = copy
        for key, buf in module._buffers.items():
            for j in range(len(devices)):
                copies[j][i]._buffers[key] = None if buf is None else buffer_copies[j][buffer_index[id(buf)]]
    return [copies[j][0] for j in range(len(devices))]


class _Scatter:
    @staticmethod
    def apply(target_gpus, chunk_sizes, dim, tensor):
        chunks = tensor.chunk(len(target_gpus), dim)
        out = []
        for device, chunk in zip(target_gpus, chunks):
            copy = chunk.clone()
            set_tag(copy, resolve(device) if not isinstance(device, int) else device)
            out.append(copy)
        return tuple(out)


class _Gather:
    @staticmethod
    def apply(target_device, dim, *inputs):
        if any(tag_of(t) < 0 for t in inputs):
            raise AssertionError("Gather function not implemented for CPU tensors")
        if all(t.dim() == 0 for t in inputs) and dim == 0:
            warnings.warn("Was asked to gather along dimension 0, but all input tensors were scalars; "
                          "will instead unsqueeze and return a vector.", stacklevel=2)
            inputs = tuple(t.view(1) for t in inputs)
        first = inputs[0]
        for i, t in enumerate(inputs[1:], start=1):
            if t.dim() != first.dim():
                raise RuntimeError("Expected all input tensors to have the same number of dimensions, but "
                                   f"tensor at index {i}has {t.dim()} dimensions, (expected {first.dim()})")
            expected = list(first.shape)
            expected[dim] = t.shape[dim]
            if list(t.shape) != expected:
                raise RuntimeError(f"Input tensor at index {i} has invalid shape {list(t.shape)}, but "
                                   f"expected {expected}")
        target = resolve(target_device) if not isinstance(target_device, int) else target_device
        moved = []
        for t in inputs:  # comm.gather copies every piece to the output device first
            copy = t.clone()
            set_tag(copy, target)
            moved.append(copy)
        out = torch.cat(moved, dim)
        set_tag(out, target)
        return out


@contextlib.contextmanager
def _cpu_primitives():
    from torch.nn.parallel import scatter_gather

    saved = scatter_gather.Scatter, scatter_gather.Gather
    scatter_gather.Scatter, scatter_gather.Gather = _Scatter, _Gather
    try:
        yield scatter_gather
    finally:
        scatter_gather.Scatter, scatter_gather.Gather = saved


def scatter_kwargs(inputs, kwargs, devices, dim=0):
    with _cpu_primitives() as sg:
        return sg.scatter_kwargs(inputs, kwargs, list(devices), dim)


def gather(outputs, target_device, dim=0):
    with _cpu_primitives() as sg:
        return sg.gather(outputs, target_device, dim)


def parallel_apply(modules, inputs, kwargs_tup=None, devices=None):
    """Replicas in threads, each with its own current device and its own tagging mode."""
    from torch._utils import ExceptionWrapper

    if kwargs_tup is None:
        kwargs_tup = ({},) * len(modules)
    devices = list(range(len(modules))) if devices is None else [_device_index(d) for d in devices]

    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of "
                             f"inputs {len(inputs)}")
    if len(modules) != len(kwargs_tup):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of "
                             f"kwargs_tup {len(kwargs_tup)}")
    grad_enabled = torch.is_grad_enabled()
    # As torch's parallel_apply: only whether autocast is on reaches the replica threads, not
    # its dtype (thread-local), so they compute in CUDA's default float16.
    autocast_enabled = torch.is_autocast_enabled("cpu")
    results: dict[int, Any] = {}
    lock = threading.Lock()
    outer_trace = _current_trace()

    def worker(i, module, args, kwargs, device):
        _install_trace(outer_trace)
        torch.set_grad_enabled(grad_enabled)
        set_current_device(device)
        try:
            # Mode stacks are per thread: each replica enters the tagging mode itself.
            with VirtualDevices(), torch.autocast("cpu", dtype=torch.float16, enabled=autocast_enabled):
                if not isinstance(args, (list, tuple)):
                    args = (args,)
                output = module(*args, **kwargs)
            with lock:
                results[i] = output
        except Exception:
            with lock:
                results[i] = ExceptionWrapper(where=f"in replica {i} on device {device}")

    if len(modules) > 1:
        # Each replica in its own thread (thread-local device, mode and grad state, as torch), but
        # one after another: real GPUs interleave the replica threads as timing falls, so state
        # they share (a container on the original module) is seen by another replica or not,
        # run by run. In order, everything replica i leaves in shared state is there when replica
        # i + 1 runs: the interleaving that exposes it, every run (a cache entry built on cuda:0
        # read on cuda:1). DataParallel has no communication between replicas that would need
        # them to run at once.
        for i, (m, a, k, d) in enumerate(zip(modules, inputs, kwargs_tup, devices)):
            thread = threading.Thread(target=worker, args=(i, m, a, k, d))
            thread.start()
            thread.join()
    else:
        # One chunk: torch runs it in the calling thread (already in the mode).
        previous = current_device()
        set_current_device(devices[0])
        try:
            worker(0, modules[0], inputs[0], kwargs_tup[0], devices[0])
        finally:
            set_current_device(previous)
    outputs = []
    for i in range(len(inputs)):
        output = results[i]
        if isinstance(output, ExceptionWrapper):
            output.reraise()
        outputs.append(output)
    return outputs


def _device_index(device: Any) -> int:
    """torch._utils._get_device_index(device, optional=True) on the emulated devices."""
    index = device if isinstance(device, int) else resolve(device)
    if index is None:
        raise ValueError(f"Expected a cuda device, but got: {device}")
    return index


@contextlib.contextmanager
def _patched(target: Any, patches: dict[str, Any]):
    """``target``'s attributes replaced by ``patches`` while active, the originals put back after."""
    saved = {name: getattr(target, name) for name in patches}
    for name, value in patches.items():
        setattr(target, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(target, name, value)


def _dataparallel_in_model_code():
    """`nn.DataParallel` and `nn.parallel.data_parallel` called by the model's own code run their
    real checks (parameters and buffers on device_ids[0], inputs scattered from anywhere) with the
    emulated replicate / scatter / parallel_apply / gather in place of the CUDA primitives torch
    binds in data_parallel.py. Every emulated device is identical, so `_check_balance` (which reads
    CUDA device properties) has nothing to warn about."""
    import importlib
    dp_module = importlib.import_module("torch.nn.parallel.data_parallel")  # the package's name is the function

    return _patched(dp_module, {"replicate": replicate, "parallel_apply": parallel_apply,
                                "scatter_kwargs": scatter_kwargs, "gather": gather,
                                "_check_balance": lambda device_ids: None})


def _current_trace():
    import sys
    return sys.gettrace()


def _install_trace(trace):
    import sys
    if trace is not None:
        sys.settrace(trace)
