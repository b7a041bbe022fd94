"""What keeps --confirm cheap without changing what it records: the model file's imports run
untraced, the tracer is on only where the model's code runs, each example is built once per batch
size, and the processes that run models let idle OpenMP threads sleep."""

import collections
import json
import subprocess
import sys
import textwrap
import typing

import pytest

torch = pytest.importorskip("torch")

_PROBE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from dpcheck.harness.child import load_module
    from dpcheck.harness.runner import install_tracer, trace_lines, untraced_imports
    tracer, executed, _, _ = trace_lines(sys.argv[1] + "/model_file.py")
    foreign = []
    def counting(frame, event, arg):
        if frame.f_code.co_filename.endswith("helper_lib.py"):
            foreign.append(frame.f_code.co_name)
        return tracer(frame, event, arg)
    install_tracer(counting)
    with untraced_imports(counting):
        model_file = load_module(Path(sys.argv[1]) / "model_file.py")  # as the child imports it
    sys.settrace(None)
    print(json.dumps({"executed": sorted(executed), "foreign": foreign, "value": model_file.VALUE}))
""")


def test_imports_of_the_model_file_run_untraced_and_its_lines_are_still_recorded(tmp_path):
    (tmp_path / "helper_lib.py").write_text("def helper():\n    return 2\n\n\nTWO = helper()\n")
    (tmp_path / "model_file.py").write_text(
        "A = 1\n"
        "import helper_lib\n"
        "from helper_lib import helper\n"
        "VALUE = A + helper_lib.TWO\n"
        "def later():\n"
        "    return helper() + 1\n"
        "VALUE += later()\n")
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, check=True)
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["value"] == 6
    assert seen["executed"] == [0, 1, 2, 3, 4, 5, 6, 7]  # every line of the model file, after each import too
    # helper_lib's module code ran inside an import statement: the tracer never saw it; its
    # function called from the model file's own code (not an import) still is traced as before.
    assert "<module>" not in seen["foreign"]
    assert seen["foreign"] == ["helper"]


def test_model_processes_let_openmp_threads_sleep_unless_the_user_chose(monkeypatch):
    from dpcheck.harness.processes import child_environment

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert child_environment()["OMP_WAIT_POLICY"] == "PASSIVE"
    assert child_environment(PYTHONDONTWRITEBYTECODE="1")["PYTHONDONTWRITEBYTECODE"] == "1"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert child_environment()["OMP_WAIT_POLICY"] == "ACTIVE"


def test_model_processes_share_the_cores_among_the_files_run_at_once(monkeypatch):
    from dpcheck.harness.processes import child_environment

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(16)))
    assert child_environment(1)["OMP_NUM_THREADS"] == "16"
    assert child_environment(4)["OMP_NUM_THREADS"] == "4"
    assert child_environment(18)["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert child_environment(4)["OMP_NUM_THREADS"] == "3"


# --- the harness builds each model once per batch size -------------------------------------------

class Counter(torch.nn.Module):
    """Its forward changes state (a counter lost with the replica), so the randomness probe needs a
    model that has not run, and the scratch probe runs."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.rand(4))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x) * self.scale


def counted(cls, calls):
    def build(batch):
        calls.append(batch)
        return cls(), (torch.randn(batch, 4),)
    return build


def test_the_example_is_built_once_per_batch_size():
    from dpcheck.findings import ObservationKind as K
    from dpcheck.harness.runner import default_batch_sizes, make_backend, run_model

    calls = []
    report = run_model(counted(Counter, calls), make_backend("emulated", 2), default_batch_sizes(2))
    # Was two builds per batch size and a third for the randomness probe, then one more for the
    # eval pass at 2N: that pass now runs a copy of the first batch's example made before it ran.
    assert calls == [4, 3, 1]
    assert report.compared == [4, 3, 1]
    assert report.modes == ["training", "eval"]
    assert {o.attr for o in report.observations if o.kind == K.STATE_LOST_ON_REPLICA} == {"calls"}


class RunsOnce(torch.nn.Module):
    """Fails in eval mode on a model that has already run: the eval pass must get one that has not."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        if not self.training and self.steps.item() > 0:
            raise RuntimeError("this model ran before the eval pass")
        self.steps += 1
        return self.fc(x)


def test_the_eval_pass_runs_the_example_as_built_not_as_the_training_run_left_it():
    from dpcheck.harness.runner import default_batch_sizes, make_backend, run_model

    calls = []

    def build(batch):
        calls.append(batch)
        return RunsOnce(), (torch.randn(batch, 4),)

    report = run_model(build, make_backend("emulated", 2), default_batch_sizes(2))
    assert calls == [4, 3, 1]
    assert report.modes == ["training", "eval"]
    assert not report.notes, report.notes  # an eval pass on a model that had run would fail: a note
    assert not report.observations, [o.evidence for o in report.observations]


def test_the_copy_has_the_parameters_buffers_and_random_state_of_a_second_build():
    from dpcheck.harness.runner import _second_model, make_backend

    backend = make_backend("emulated", 2)
    with backend.context():
        torch.manual_seed(0)
        model = Counter()
        after_build = torch.random.get_rng_state()
        copied = _second_model(model, lambda b: (Counter(), ()), 4, backend)
        assert torch.equal(torch.random.get_rng_state(), after_build)
        torch.manual_seed(0)
        rebuilt = Counter()
    assert copied is not model
    for name, value in rebuilt.state_dict().items():
        assert torch.equal(copied.state_dict()[name], value), name
        assert copied.state_dict()[name].data_ptr() != model.state_dict()[name].data_ptr()


class HookStash(torch.nn.Module):
    """A hook whose closure holds the model: a deep copy's hook would still write to the original."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.seen = []
        self.fc.register_forward_hook(lambda module, inputs, output: self.seen.append(output.shape[0]))

    def forward(self, x):
        return self.fc(x)


def test_a_model_a_copy_would_share_with_its_original_is_built_again():
    from dpcheck.findings import ObservationKind as K
    from dpcheck.harness.runner import make_backend, run_model

    calls = []
    report = run_model(counted(HookStash, calls), make_backend("emulated", 2), [4])
    # The single-device and the DataParallel model (built again: a copy would share the hook);
    # then the eval pass's two (no copy kept for it either). No third for the randomness probe: the
    # step drew no random numbers.
    assert calls == [4, 4, 4, 4]
    # The replicas' hook appends to the DataParallel model's own list (a copy's would append to the
    # single-device model's, and `seen` would look lost with the replica).
    seen = [o for o in report.observations if o.attr == "seen"]
    assert [o.kind for o in seen] == [K.STATE_MUTATED_PER_REPLICA], [o.evidence for o in report.observations]


def test_whether_an_attribute_is_per_call_scratch_is_probed_once(monkeypatch):
    from dpcheck.harness import runner

    probed = []
    original = runner._scratch_each_call

    def counting(model, keys, *args):
        probed.append(sorted(keys))
        return original(model, keys, *args)

    monkeypatch.setattr(runner, "_scratch_each_call", counting)
    runner.run_model(counted(Counter, []), runner.make_backend("emulated", 2), runner.default_batch_sizes(2))
    assert probed == [["calls"]]


_TRACED_PHASES = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from dpcheck.harness import child, runner
    seen = {}
    def watch(name):
        original = getattr(runner, name)
        def watched(*args, **kwargs):
            seen.setdefault(name, set()).add(sys.gettrace() is not None)
            return original(*args, **kwargs)
        setattr(runner, name, watched)
    for name in ("snapshot", "_grads", "_compare_outputs", "_compare_state", "_second_model"):
        watch(name)
    result = child.run_file(sys.argv[1], "emulated", 2, None)
    print(json.dumps({"seen": {k: sorted(v) for k, v in seen.items()}, "error": result["error"],
                      "model": {k: result["models"][0][k] for k in ("dataparallel_lines", "reference_lines")}}))
""")


def test_the_line_tracer_is_on_only_where_the_models_code_runs(tmp_path):
    model_file = tmp_path / "model_file.py"
    model_file.write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4, 2)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n"
        "def dpcheck_example(batch_size):\n"
        "    return Net(), (torch.randn(batch_size, 4),)\n")
    proc = subprocess.run([sys.executable, "-c", _TRACED_PHASES, str(model_file)], capture_output=True, text=True,
                          check=True)
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["error"] is None
    # Copies, snapshots and comparisons run untraced (a global trace function slows every frame) ...
    assert seen["seen"] == {name: [False] for name in ("snapshot", "_grads", "_compare_outputs", "_compare_state",
                                                       "_second_model")}
    # ... while forward's lines are still recorded in both steps.
    assert 7 in seen["model"]["dataparallel_lines"] and 7 in seen["model"]["reference_lines"]


def test_snapshots_and_gradient_reads_run_outside_the_emulations_tagging_mode(monkeypatch):
    from torch.overrides import _get_current_function_mode_stack

    from dpcheck.harness import emulation, runner

    seen = []

    def watch(name):
        original = getattr(runner, name)

        def watched(*args, **kwargs):
            seen.append((name, any(isinstance(m, emulation.VirtualDevices) for m in _get_current_function_mode_stack())
                         or torch._C._is_torch_function_enabled() and bool(_get_current_function_mode_stack())))
            return original(*args, **kwargs)
        monkeypatch.setattr(runner, name, watched)

    for name in ("snapshot", "_grads", "_same_states"):
        watch(name)
    report = runner.run_model(counted(Counter, []), runner.make_backend("emulated", 2), [4])
    assert report.compared == [4]
    # Each tensor op under the mode pays its Python hook; a snapshot's sums and the generator
    # states' comparison need no device tags.
    assert {name for name, _ in seen} == {"snapshot", "_grads", "_same_states"}
    assert not any(under_mode for _, under_mode in seen), seen


def test_the_emulated_backend_seeds_only_the_cpu_generator():
    from dpcheck.harness.runner import default_batch_sizes, make_backend, run_model

    backend = make_backend("emulated", 2)
    queued = len(torch.cuda._queued_calls)
    report = run_model(counted(Counter, []), backend, default_batch_sizes(2))
    assert report.compared == [4, 3, 1]
    # torch.manual_seed under the emulation's "available" CUDA queues a lazy CUDA seed (with a
    # formatted stack) every call; the emulation's tensors all draw from the CPU generator.
    assert len(torch.cuda._queued_calls) == queued
    backend.seed(7)
    first = torch.rand(3)
    backend.seed(7)
    assert torch.equal(torch.rand(3), first)


class Draws(torch.nn.Module):
    """Its forward draws from a generator when ``source`` says which (else none)."""

    def __init__(self, source=None):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.source = source

    def forward(self, x):
        out = self.fc(x)
        if self.source == "torch":
            out = out + 0.1 * torch.randn_like(out)
        elif self.source == "python":
            import random
            out = out * (1.0 + random.random())
        elif self.source == "numpy":
            import numpy
            out = out * float(1.0 + numpy.random.rand())
        return out


@pytest.mark.parametrize("source", [None, "torch", "python", "numpy"])
def test_the_randomness_probe_runs_only_when_the_step_drew_random_numbers(monkeypatch, source):
    from dpcheck.harness import runner

    if source == "numpy":
        pytest.importorskip("numpy")
    probed = []
    original = runner._stochastic
    monkeypatch.setattr(runner, "_stochastic", lambda *a, **k: probed.append(1) or original(*a, **k))
    report = runner.run_model(lambda batch: (Draws(source), (torch.randn(batch, 4),)),
                              runner.make_backend("emulated", 2), runner.default_batch_sizes(2))
    assert probed == ([1] if source else [])
    # Random outputs are found random (values not compared); without draws they are compared.
    assert report.stochastic is bool(source)


class Drops(torch.nn.Module):
    """Dropout and a drop probability held as a float: each forward notes what it ran with."""

    seen: typing.ClassVar[list] = []

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)
        self.attn_dropout = 0.25

    def forward(self, x):
        Drops.seen.append((self.drop.p, self.attn_dropout))
        return self.drop(self.fc(x))


def test_randomness_is_neutralised_once_per_build_and_every_copy_runs_neutralised(monkeypatch):
    from dpcheck.harness import runner

    calls, walks = [], []
    original = runner._neutralise_randomness
    monkeypatch.setattr(runner, "_neutralise_randomness", lambda model: walks.append(1) or original(model))
    Drops.seen = []
    report = runner.run_model(counted(Drops, calls), runner.make_backend("emulated", 2), runner.default_batch_sizes(2))
    assert report.compared == [4, 3, 1] and report.modes == ["training", "eval"] and not report.observations
    # Was once per model run (two a batch size, two in the eval pass): the copies keep what it set.
    assert len(walks) == len(calls) == 3
    assert Drops.seen and set(Drops.seen) == {(0.0, 0.0)}


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 8])
def test_the_chunk_sizes_are_those_scatter_cuts_without_a_tensor_op(devices):
    from dpcheck.harness.runner import _chunk_sizes

    for batch in range(0, 40):
        assert _chunk_sizes(batch, devices) == [len(c) for c in torch.arange(batch).chunk(devices)], batch


def test_the_model_copy_gets_its_own_hook_dicts_and_keeps_shared_objects_shared():
    # The copy seeds deepcopy's memo with a new empty dict for each empty hook dict (cheaper than
    # deepcopy's reduce/reconstruct): each must still be the copy's own, and sharing kept.
    from dpcheck.harness.runner import make_backend

    shared_empty: dict = {}
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    model[0].table = model[1].table = shared_empty
    model[1].weight = model[0].weight
    copied = make_backend("emulated", 2).copy(model)

    copied[0].register_forward_hook(lambda *_: None)
    assert not model[0]._forward_hooks and len(copied[0]._forward_hooks) == 1
    assert copied[0]._forward_pre_hooks is not model[0]._forward_pre_hooks
    assert copied[0].table is copied[1].table and copied[0].table is not shared_empty
    assert copied[1].weight is copied[0].weight and copied[0].weight is not model[0].weight
    assert torch.equal(copied[0].weight, model[0].weight)


def test_ops_on_cpu_tensors_alone_skip_the_emulations_device_bookkeeping(monkeypatch):
    from dpcheck.harness import emulation

    checked = []
    for name in ("_devices_of", "set_tag"):
        original = getattr(emulation, name)
        monkeypatch.setattr(emulation, name, lambda *a, _o=original, _n=name, **k: (checked.append(_n), _o(*a, **k))[1])
    with emulation.emulated_cuda(2):
        layer = torch.nn.Linear(4, 4)  # what building an example mostly runs: CPU factories and init
        cpu = layer(torch.randn(3, 4)) * 2
        assert not checked, checked
        assert cpu.device == torch.device("cpu")
        # A virtual device anywhere in the arguments, or asked for, still takes the full path.
        on_one = torch.ones(3, 4, device="cuda:1") * 2
        assert on_one.device == torch.device("cuda", 1)
        with pytest.raises(RuntimeError, match="same device"):
            torch.cat([on_one, torch.ones(3, 4).cuda(0)])
        with pytest.raises(RuntimeError, match="same device"):
            torch.stack([[cpu][0], on_one])
        assert checked


def test_device0_memory_is_measured_once_at_the_first_and_largest_batch():
    from dpcheck.findings import ObservationKind as K
    from dpcheck.harness.runner import EmulatedBackend, default_batch_sizes, run_model

    class Measuring(EmulatedBackend):
        """Reports an imbalance every time it is asked, and counts how often that is."""

        def __init__(self, n):
            super().__init__(n)
            self.resets = self.reads = 0

        def reset_memory(self):
            self.resets += 1

        def memory_imbalance(self):
            self.reads += 1
            return "peak memory growth during the DataParallel step: cuda:0 +900 MiB, cuda:1 +1 MiB"

    backend = Measuring(2)
    sizes = default_batch_sizes(2)
    assert sizes[0] == max(sizes)
    report = run_model(counted(Counter, []), backend, sizes)
    assert report.modes == ["training", "eval"]  # the eval pass ran and did not measure again
    assert (backend.resets, backend.reads) == (1, 1)
    assert [o.batch for o in report.observations if o.kind == K.MEMORY_IMBALANCE] == [sizes[0]]


def test_the_emulation_is_entered_once_per_model_and_a_nested_entry_adds_no_second_mode(monkeypatch):
    from torch.overrides import _get_current_function_mode_stack

    from dpcheck.harness import emulation
    from dpcheck.harness.runner import default_batch_sizes, make_backend, run_model

    def tagging_modes():
        return sum(isinstance(m, emulation.VirtualDevices) for m in _get_current_function_mode_stack())

    available = torch.cuda.is_available
    with emulation.emulated_cuda(2):
        with emulation.emulated_cuda(2):
            assert tagging_modes() == 1  # a second mode would run every op's Python hook twice
            assert torch.cuda.device_count() == 2
        assert tagging_modes() == 1 and torch.cuda.is_available()  # the inner exit undid nothing
    assert tagging_modes() == 0 and torch.cuda.is_available is available

    entered = []
    original = emulation._dataparallel_in_model_code

    def counting():
        entered.append(1)
        return original()
    monkeypatch.setattr(emulation, "_dataparallel_in_model_code", counting)
    report = run_model(counted(Counter, []), make_backend("emulated", 2), default_batch_sizes(2))
    assert report.compared == [4, 3, 1] and report.modes == ["training", "eval"]
    # Once for the model (three batches and the eval pass), not once per batch; the model file's
    # import enters it once more in the child.
    assert len(entered) == 1


def test_outputs_and_gradients_are_compared_outside_the_emulations_tagging_mode(monkeypatch):
    from torch.overrides import _get_current_function_mode_stack

    from dpcheck.harness import emulation, runner

    seen = []

    def watch(name):
        original = getattr(runner, name)

        def watched(*args, **kwargs):
            seen.append((name, torch._C._is_torch_function_enabled() and any(
                isinstance(m, emulation.VirtualDevices) for m in _get_current_function_mode_stack())))
            return original(*args, **kwargs)
        monkeypatch.setattr(runner, name, watched)

    for name in ("_compare_outputs", "_compare_state", "_compare_grads", "_argument_observations"):
        watch(name)
    report = runner.run_model(counted(Counter, []), runner.make_backend("emulated", 2), [4, 3])
    assert report.compared == [4, 3]
    assert {name for name, _ in seen} == {"_compare_outputs", "_compare_state", "_compare_grads",
                                          "_argument_observations"}
    assert not any(under_mode for _, under_mode in seen), seen


@pytest.mark.parametrize(("a", "b", "summed"), [
    ([1.0, 2.0], [1.0, 2.0], False),
    ([1.0, 2.0], [1.0 + 5e-5, 2.0], False),           # within atol
    ([1.0, 2.0], [1.0 + 5e-4, 2.0], False),           # beyond atol, within rtol * |b|
    ([1.0, 2.0], [1.1, 2.0], False),                  # beyond both
    ([1e4, 1.0], [1e4 + 5.0, 1.0], False),            # within rtol of a large element
    ([1e4, 1.0], [1e4, 1.5], True),                   # summed: the scale admits it
    ([1e4, 1.0], [1e4, 1.5], False),                  # element-wise it does not
    ([float("nan"), 1.0], [float("nan"), 1.0], False),
    ([float("nan"), 1.0], [0.0, 1.0], False),
    ([float("inf"), 1.0], [float("inf"), 1.0], False),
    ([1.0, 1.0], [float("inf"), 1.0], False),         # an infinity is close only to itself
    ([float("inf"), 1.0], [1.0, 1.0], False),
    ([float("-inf"), 1.0], [float("inf"), 1.0], False),
])
def test_the_quick_closeness_check_agrees_with_allclose(a, b, summed):
    from dpcheck.harness.runner import _all_close_summed, _close

    x, y = torch.tensor(a), torch.tensor(b)
    atol, rtol = 1e-4, 1e-3
    if summed:
        atol = max(atol, rtol * float(x.abs().nan_to_num(posinf=0.0, neginf=0.0).max()))
    expected = torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True)
    assert _close(x, y, summed=summed) == expected
    if summed:
        # The fused check over many gradients may only say "close" where the pair is, given the
        # same largest gradient element of the whole model.
        close, largest = _all_close_summed([(x, y), (y, y)], None)
        assert not close or _close(x, y, summed=True, largest=largest)


def test_the_eval_pass_reuses_the_arguments_only_where_placing_them_copies_everything():
    from dpcheck.harness.runner import default_batch_sizes, make_backend, run_model

    class Notes:
        """An argument the model changes: placing passes it as it is."""

        def __init__(self):
            self.seen = 0

    class Noting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x, notes):
            if not self.training and notes.seen:
                raise RuntimeError("the eval pass got the arguments the training run changed")
            notes.seen += 1
            return self.fc(x)

    backend = make_backend("emulated", 2)
    assert backend.placing_copies((torch.randn(2, 4), [torch.randn(2)], {"k": (1, "s", None)}), {})
    assert not backend.placing_copies((torch.randn(2, 4), Notes()), {})
    assert not backend.placing_copies((torch.nn.Parameter(torch.randn(2)),), {})  # a subclass: not assumed
    report = run_model(lambda batch: (Noting(), (torch.randn(batch, 4), Notes())), backend, default_batch_sizes(2))
    assert report.modes == ["training", "eval"]
    assert not report.notes, report.notes


def test_the_model_copy_makes_plain_tensors_as_deepcopy_does_sharing_and_attributes_kept():
    import copy

    from dpcheck.harness import emulation
    from dpcheck.harness.runner import _deepcopy

    class Buffers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.BatchNorm1d(4)
            self.register_buffer("table", torch.arange(6.0).reshape(2, 3))
            self.register_buffer("row", self.table[1])  # a view: shares the table's storage
            self.register_buffer("transposed", torch.randn(3, 2).t())
            self.register_buffer("trainable", torch.zeros(2, requires_grad=True))
            self.register_buffer("absent", None)
            self.mask = torch.ones(3)
            self.prefix = self.mask[:2]

    model = Buffers()
    emulation.set_tag(model.table, 1)
    model.row.note = [1, 2]
    for copied in (copy.deepcopy(model), _deepcopy(model)):
        assert copied.row.untyped_storage().data_ptr() == copied.table.untyped_storage().data_ptr()
        assert copied.prefix.untyped_storage().data_ptr() == copied.mask.untyped_storage().data_ptr()
        assert copied.table.untyped_storage().data_ptr() != model.table.untyped_storage().data_ptr()
        assert copied.row.storage_offset() == 3 and copied.transposed.stride() == (1, 2)
        assert emulation.tag_of(copied.table) == 1 and copied.row.note == [1, 2] and copied.row.note is not model.row.note
        assert copied.trainable.requires_grad and copied.trainable.is_leaf and copied.absent is None
        for name, tensor in model.state_dict().items():
            assert torch.equal(copied.state_dict()[name], tensor) and copied.state_dict()[name].dtype == tensor.dtype
        copied.table.add_(1)
        assert model.table[0, 0] == 0 and copied.row[0] == 4.0  # the copy's own storage, still shared by the view


class _Colour(__import__("enum").Enum):
    RED = 1


class _Opaque:
    """An object only deepcopy's generic path copies."""

    def __init__(self, items=None):
        self.items = [1, 2] if items is None else items


class _CopiedAsList:
    """An object whose deep copy is a list."""

    def __deepcopy__(self, memo):
        return [1, 2]


class _CopiedAsItself:
    """An object deepcopy does not copy."""

    def __deepcopy__(self, memo):
        return self


class _OwnCopy(torch.nn.Linear):
    """A module with its own __deepcopy__: left to deepcopy."""

    def __deepcopy__(self, memo):
        clone = _OwnCopy(2, 2)
        clone.load_state_dict(self.state_dict())
        clone.note = "copied by its own __deepcopy__"
        return clone


def _structure(root, original_ids=frozenset()):
    """Everything deepcopy decides about a copy, as data: each object's type, values (tensors: dtype,
    shape, stride, offset, values, leaf and grad flags, attributes), which paths reach the same
    object (or the same tensor storage), and which objects are the original's (``original_ids``)."""
    seen: dict[int, str] = {}
    storages: dict[int, str] = {}
    out = []

    def walk(obj, path, depth=0):
        if id(obj) in seen:
            out.append((path, "same as", seen[id(obj)]))
            return
        if obj is None or isinstance(obj, (bool, int, float, str, __import__("enum").Enum)):
            out.append((path, repr(obj)))
            return
        seen[id(obj)] = path
        if id(obj) in original_ids:
            out.append((path, "the original's"))
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage().data_ptr()
            out.append((path, type(obj).__name__, str(obj.dtype), tuple(obj.shape), obj.stride(), obj.storage_offset(),
                        obj.detach().tolist(), obj.requires_grad, obj.is_leaf, storages.setdefault(storage, path)))
            attributes(obj, path, depth)
        elif isinstance(obj, dict):
            out.append((path, type(obj).__name__, list(obj)))
            for key, value in obj.items():
                walk(value, f"{path}[{key!r}]", depth + 1)
        elif isinstance(obj, (list, tuple, set)):
            out.append((path, type(obj).__name__, len(obj)))
            for i, value in enumerate(sorted(obj) if isinstance(obj, set) else obj):
                walk(value, f"{path}[{i}]", depth + 1)
        elif callable(obj) and not isinstance(obj, torch.nn.Module):
            out.append((path, "callable", getattr(obj, "__name__", type(obj).__name__)))
        else:
            out.append((path, type(obj).__name__))
            attributes(obj, path, depth)

    def attributes(obj, path, depth):  # the instance's own dict is walked as part of it
        out.append((path + ".__dict__", list(vars(obj))))
        for key, value in vars(obj).items():
            walk(value, f"{path}.{key}", depth + 1)

    walk(root, "model")
    return out, set(seen)


def _awkward_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 2, 3), torch.nn.BatchNorm1d(4),
                                torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]),
                                torch.nn.ModuleDict({"head": torch.nn.Linear(2, 1)}),
                                torch.nn.ParameterList([torch.nn.Parameter(torch.ones(3))]))
    model.widths = [8, (4, 4), {"k": 1}]
    model.kinds = {"relu", "gelu"}
    model.colour = _Colour.RED
    model.table = torch.arange(6.0).reshape(2, 3)
    model.row = model.table[1]  # a view sharing the table's storage
    model.register_buffer("steps", torch.zeros((), dtype=torch.long))
    model.named = {"weight": model[2][0].weight, "table": model.table}  # shared with the module's own
    model[2][1].weight = model[2][0].weight  # a shared parameter
    model[3].parent_ref = model[2]  # a module reached twice
    model[2][0].hooks_like = collections.OrderedDict(a=1)
    return model


def test_the_model_copy_is_the_copy_deepcopy_makes():
    import copy

    from dpcheck.harness.runner import _deepcopy

    model = _awkward_model()
    model.own = _OwnCopy(2, 2)  # a module with its own __deepcopy__, inside a plain one
    model[1].__deepcopy__ = lambda memo: torch.nn.Identity()  # ... and one set on an instance
    model.opaque = _Opaque()
    expected, copied = copy.deepcopy(model), _deepcopy(model)
    _, original_ids = _structure(model)
    assert _structure(copied, original_ids)[0] == _structure(expected, original_ids)[0]
    assert copied.own.note == "copied by its own __deepcopy__"
    copied.table.add_(1)
    assert model.table[0, 0] == 0 and copied.row[0] == 4.0  # the copy's own storage, shared by its view


class _TiedLM(torch.nn.Module):
    """Tied input and output embeddings, a parametrized layer, a weight-normed one, a list attribute."""

    def __init__(self):
        super().__init__()
        from torch.nn.utils import parametrizations, parametrize

        class Symmetric(torch.nn.Module):
            def forward(self, weight):
                return weight.triu() + weight.triu(1).transpose(0, 1)

        self.embed = torch.nn.Embedding(5, 4)
        self.square = torch.nn.Linear(4, 4)
        parametrize.register_parametrization(self.square, "weight", Symmetric())
        self.normed = parametrizations.weight_norm(torch.nn.Linear(4, 4))
        self.head = torch.nn.Linear(4, 5, bias=False)
        self.head.weight = self.embed.weight
        self.widths = [4, 4]

    def forward(self, ids):
        return self.head(self.normed(self.square(self.embed(ids))))


def test_the_model_copy_keeps_tied_weights_tied_and_parametrizations_as_deepcopy_does():
    import copy
    import warnings

    from dpcheck.harness import runner
    from dpcheck.harness.runner import _deepcopy

    torch.manual_seed(0)
    model = _TiedLM()
    ids = torch.tensor([[0, 3, 4]])
    expected, copied = copy.deepcopy(model), _deepcopy(model)
    _, original_ids = _structure(model)
    assert _structure(copied, original_ids)[0] == _structure(expected, original_ids)[0]
    assert copied.head.weight is copied.embed.weight and copied.embed.weight is not model.embed.weight
    assert type(copied.square) is type(expected.square)  # the parametrized class (deepcopy's own path)
    assert copied.square.parametrizations.weight.original is not model.square.parametrizations.weight.original
    assert torch.equal(copied(ids), model(ids))
    copied.widths.append(8)
    with torch.no_grad():
        copied.embed.weight.add_(1)
        copied.square.parametrizations.weight.original.mul_(2)
    assert model.widths == [4, 4] and not torch.equal(copied(ids), model(ids))
    assert torch.equal(copied.head.weight, copied.embed.weight)  # still one tensor in the copy

    # The old weight norm (a forward pre-hook and a computed, non-leaf `weight`) cannot be deep-copied:
    # neither copy is made, and the harness builds the model again.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated for the parametrization above
        old_normed = torch.nn.Sequential(torch.nn.utils.weight_norm(torch.nn.Linear(4, 4)))
    for copier in (copy.deepcopy, _deepcopy):
        with pytest.raises(RuntimeError, match="deepcopy"):
            copier(old_normed)
    assert runner._faithful_copy(old_normed, runner.make_backend("emulated", 2)) is None


def test_a_copy_made_of_new_objects_alone_skips_the_check_that_it_reaches_the_original(monkeypatch):
    from dpcheck.harness import runner

    delegated: list = []
    runner._deepcopy(_awkward_model(), delegated)
    assert delegated == []  # modules, containers, tensors, atoms and enum members: copied directly

    checked = []
    original = runner._refers_to
    monkeypatch.setattr(runner, "_refers_to", lambda *args: checked.append(1) or original(*args))
    backend = runner.make_backend("emulated", 2)
    assert runner._faithful_copy(_awkward_model(), backend) is not None and not checked

    # A function without a closure (an activation function held as an attribute) reaches nothing.
    model = _awkward_model()
    model.activation = torch.nn.functional.gelu
    model.ad_hoc = lambda x: x * 2
    delegated = []
    assert runner._deepcopy(model, delegated).activation is torch.nn.functional.gelu and delegated == []
    assert runner._faithful_copy(model, backend) is not None and not checked

    def closing_over(held):
        return lambda: held

    # A function's closure or a weak reference kept; objects deepcopy's generic path copies into a kind
    # the check looks into (a list), into the original itself, or into copies of tensors or modules.
    for value in (closing_over([1, 2]), [__import__("weakref").ref(backend)], _CopiedAsList(), _CopiedAsItself(),
                  _Opaque(torch.ones(2)), _Opaque(torch.nn.Linear(2, 2))):
        model = _awkward_model()
        model.extra = value
        delegated = []
        runner._deepcopy(model, delegated)
        assert delegated, value
        assert runner._faithful_copy(model, backend) is not None and checked
        checked.clear()

    # Any other object deepcopy copies generically (a transformers config) into a new one: the check
    # cannot find the original through it (it does not look inside such objects).
    model = _awkward_model()
    model.config = _Opaque({"sizes": [1, 2]})
    delegated = []
    copied = runner._deepcopy(model, delegated)
    assert delegated == [] and copied.config.items is not model.config.items
    assert not original(copied, model)
    assert runner._faithful_copy(model, backend) is not None and not checked

    holder = _awkward_model()
    holder.stash = lambda: holder  # reaches the original: the copy is refused, the model is built again
    assert runner._faithful_copy(holder, backend) is None

    # An object that leads deepcopy's generic path to a module of the model before the module's own
    # copy is made: that module is copied generically, its function reaching the original kept as it is.
    holder = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    holder[0].config = _Opaque(holder[1])
    holder[1].stash = lambda: holder
    delegated = []
    runner._deepcopy(holder, delegated)
    assert delegated and original(runner._deepcopy(holder), holder)
    assert runner._faithful_copy(holder, backend) is None


def test_forwards_parameter_names_are_those_inspect_signature_gives():
    import functools
    import inspect

    from dpcheck.harness.runner import _parameter_names

    def wrapping(f):
        @functools.wraps(f)
        def wrapper(self, *args, **kwargs):
            return f(self, *args, **kwargs)
        return wrapper

    class Plain(torch.nn.Module):
        def forward(self, x, mask=None, *rest, scale=1.0, **extra):
            return x

    class PositionalOnly(torch.nn.Module):
        def forward(self, x, /, y):
            return x

    class StarOnly(torch.nn.Module):
        def forward(*args):
            return args

    class Wrapped(torch.nn.Module):
        @wrapping
        def forward(self, input_ids, attention_mask=None):
            return input_ids

    class Signed(torch.nn.Module):
        def forward(self, *args):
            return args
        forward.__signature__ = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                                                   inspect.Parameter("z", inspect.Parameter.POSITIONAL_OR_KEYWORD)])

    expected = {Plain: ["x", "mask"], PositionalOnly: ["x", "y"], StarOnly: [], Wrapped: ["input_ids", "attention_mask"],
                Signed: ["z"], torch.nn.Linear: ["input"]}
    for cls, names in expected.items():
        model = cls(4, 4) if cls is torch.nn.Linear else cls()
        assert _parameter_names(model) == names, cls
        assert names == [p.name for p in inspect.signature(model.forward).parameters.values()
                         if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)], cls


def _snapshot_by_definition(model):
    """What a snapshot holds, walked the plain way: every attribute of every module (nn.Module's own
    and functions left out) described, then its buffers (not a training-mode BatchNorm's statistics)
    and its submodule count."""
    from torch.nn.modules.batchnorm import _BatchNorm

    from dpcheck.harness.runner import _MODULE_INTERNALS, _describe

    state = {}
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        for key, value in vars(module).items():
            if key in _MODULE_INTERNALS or key == "training" or callable(value) and not isinstance(
                    value, (torch.Tensor, torch.nn.Module)):
                continue
            state[prefix + key] = _describe(value)
        for key, buf in module._buffers.items():
            if key in ("running_mean", "running_var", "num_batches_tracked") and module.training and isinstance(
                    module, _BatchNorm):
                continue
            state[prefix + key] = ("buffer",) + tuple(_describe(buf)[1:]) if buf is not None else None
        state[prefix + "<submodules>"] = ("value", str(len(module._modules)))
    return state


def test_a_snapshot_describes_every_attribute_beyond_nn_modules_own():
    from dpcheck.harness.runner import snapshot

    model = _awkward_model()
    model.extra = (1.5, "s", None, True, 10**30, "x" * 200)
    model.count, model.rate, model.name, model.flag, model.nothing = 3, 0.5, "net", False, None
    model.stash = collections.deque([torch.ones(2)])
    model.act = torch.nn.functional.relu  # a function: not state
    model.bound = model.forward  # a method: not state
    model.opaque = _Opaque()
    model[1].eval()  # an eval-mode BatchNorm's statistics are state
    model.add_module("norm", torch.nn.BatchNorm1d(3))  # a training-mode one's are not
    model.register_buffer("absent", None)
    state = snapshot(model)
    assert state == _snapshot_by_definition(model)
    assert state["count"] == ("value", "3") and state["name"] == ("value", "'net'") and "act" not in state
    assert "1.running_mean" in state and "norm.running_mean" not in state and state["absent"] is None


def test_placing_a_module_tags_every_parameter_and_buffer_of_every_submodule():
    from dpcheck.harness import emulation

    model = _awkward_model()
    model.loose = torch.ones(2)  # a plain attribute: not moved by module.cuda()
    emulation.place_module(model, 1)
    assert all(emulation.tag_of(t) == 1 for t in (*model.parameters(), *model.buffers()))
    assert emulation.tag_of(model.loose) == -1
