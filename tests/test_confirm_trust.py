"""--confirm you can trust (issue 12): the harness does not invent differences, in process."""

import pytest
import torch

from dpcheck.findings import ObservationKind as K
from dpcheck.harness import check


class ScalarLoss(torch.nn.Module):
    """Returns the loss, as many training wrappers do."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x, y):
        return ((self.fc(x).squeeze(-1) - y) ** 2).mean()


def kinds(report):
    return {o.kind for o in report.observations}


def test_a_scalar_loss_is_averaged_like_a_trainer_does_not_summed():
    torch.manual_seed(0)
    report = check(ScalarLoss(), (torch.randn(4, 4), torch.randn(4)), backend="emulated", devices=2)
    # What DataParallel really changes: one loss per replica ...
    assert K.SCALAR_OUTPUT_GATHERED in kinds(report)
    # ... but `loss.mean()` of the gathered vector gives the single-device gradient (equal chunks):
    # summing it used to double the gradient and "confirm" a difference that trainers never see.
    assert K.GRADS_DIFFER not in kinds(report), [o.evidence for o in report.observations]


def run(model_class, make_args, sizes=(4, 3, 1)):
    from dpcheck.harness.runner import make_backend, run_model

    def build(batch):
        torch.manual_seed(0)
        return model_class(), make_args(batch)
    return run_model(build, make_backend("emulated", 2), list(sizes))


class TakesPair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, pair, sizes=None):
        x, y = pair
        return self.fc(x) + y


def argument_kinds(report):
    return {o.kind for o in report.observations if o.kind.startswith("argument")}


def test_a_tuple_of_batch_major_tensors_is_scattered_correctly_and_not_reported():
    report = run(TakesPair, lambda b: ((torch.randn(b, 4), torch.randn(b, 4)),))
    assert argument_kinds(report) == set(), [o.evidence for o in report.observations]


def test_a_list_with_one_tensor_per_sample_is_reported_as_split_per_element():
    report = run(TakesPair, lambda b: ([torch.randn(4) for _ in range(b)],))
    assert K.ARGUMENT_LIST_SPLIT_PER_ELEMENT in argument_kinds(report)


def test_a_config_list_whose_length_happens_to_equal_the_batch_is_not_a_batch():
    # Four kernel sizes at batch 4: the old guess (length == batch) called it an unsplit batch.
    report = run(TakesPair, lambda b: ((torch.randn(b, 4), torch.randn(b, 4)), [3, 5, 7, 9]))
    assert K.ARGUMENT_NOT_SPLIT not in argument_kinds(report), [o.evidence for o in report.observations]
    # A list that grows with the batch is per-sample data passed whole to every replica.
    report = run(TakesPair, lambda b: ((torch.randn(b, 4), torch.randn(b, 4)), list(range(b))))
    assert K.ARGUMENT_NOT_SPLIT in argument_kinds(report)


class Detector(torch.nn.Module):
    """torchvision detection's call: `model(images, targets)`, a list of images and a list of
    {"boxes", "labels"} dicts, one per image."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, images, targets, names=None):
        return torch.stack([self.fc(t["boxes"]).sum() + i.mean() for i, t in zip(images, targets)])


def detection_inputs(batch):
    generator = torch.Generator().manual_seed(batch)
    images = [torch.rand(3, 8, 8, generator=generator) for _ in range(batch)]
    targets = [{"boxes": torch.rand(2, 4, generator=generator), "labels": torch.randint(1, 3, (2,))}
               for _ in range(batch)]
    return images, targets


def test_a_list_of_dicts_of_tensors_is_split_element_by_element_not_passed_whole():
    # scatter recurses into the list and each dict: every replica gets every target, its boxes
    # cut along dim 0 (DP805's mechanism), not the whole list (DP804's).
    report = run(Detector, detection_inputs)
    split = {o.details["argument"]: o for o in report.observations if o.kind == K.ARGUMENT_LIST_SPLIT_PER_ELEMENT}
    assert set(split) == {"argument 0", "argument 1"}, [o.evidence for o in report.observations]
    assert "holding tensors" in split["argument 1"].evidence
    assert K.ARGUMENT_NOT_SPLIT not in argument_kinds(report), [o.evidence for o in report.observations]
    # Per-sample data with no tensor anywhere inside still reaches every replica whole.
    report = run(Detector, lambda b: (*detection_inputs(b), [{"name": f"img{i}"} for i in range(b)]))
    whole = [o for o in report.observations if o.kind == K.ARGUMENT_NOT_SPLIT]
    assert [o.details["argument"] for o in whole] == ["argument 2"], [o.evidence for o in report.observations]


class SequenceFirst(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(4, 4)

    def forward(self, x):
        return self.rnn(x)[0]


def test_the_batch_dim_is_measured_not_guessed_from_the_first_tensor():
    # (time, batch, features): DataParallel splits the time steps. Guessing the batch from
    # dim 0 took the time length (7) for the batch and saw nothing wrong with the input.
    report = run(SequenceFirst, lambda b: (torch.randn(7, b, 4),))
    split = [o for o in report.observations if o.kind == K.ARGUMENT_NOT_BATCH_SPLIT]
    assert split and split[0].details["argument"] == "argument 0"


def test_tolerances_follow_the_dtype():
    # bf16 rounds per-replica gradient sums differently from one device: not a DataParallel hazard.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(torch.bfloat16)
    report = check(model, (torch.randn(8, 64, dtype=torch.bfloat16),), backend="emulated")
    assert K.GRADS_DIFFER not in kinds(report), [o.evidence for o in report.observations]
    # A real difference in bf16 is still seen.

    class Normalised(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.fc(x) - self.fc(x).mean(0)  # depends on the whole batch

    torch.manual_seed(0)
    report = check(Normalised().to(torch.bfloat16), (torch.randn(8, 8, dtype=torch.bfloat16) * 4,), backend="emulated")
    assert K.VALUES_DIFFER in kinds(report)


def test_check_copies_the_model_outside_the_emulation_mode():
    from torch.overrides import _get_current_function_mode_stack

    modes_while_copying = []

    class Recorded(torch.nn.Linear):
        def __deepcopy__(self, memo):
            modes_while_copying.append(len(_get_current_function_mode_stack()))
            clone = Recorded(4, 4)
            clone.load_state_dict(self.state_dict())
            return clone

    check(Recorded(4, 4), (torch.randn(4, 4),), backend="emulated")
    # Copying under the emulation's TorchFunctionMode routes every tensor op through it
    # (Faster R-CNN: 6.8 s against 0.02 s outside).
    assert modes_while_copying and not any(modes_while_copying)


def test_lazy_modules_materialise_under_the_emulation():
    from dpcheck.harness.emulation import emulated_cuda

    with emulated_cuda(2):
        model = torch.nn.LazyLinear(4)
        model(torch.randn(2, 3))  # registering the uninitialized parameter asked for its dims
    assert model.weight.shape == (4, 3)


def test_a_file_whose_name_is_not_an_import_name_is_still_run(tmp_path):
    """`model.v2.py` cannot be imported by name; it is loaded from its path and compared."""
    import json

    from conftest import run_cli

    (tmp_path / "model.v2.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
        "        self.steps = 0\n\n    def forward(self, x):\n        self.steps += 1\n"
        "        return self.fc(x)\n\n\ndef dpcheck_example(batch_size=4):\n"
        "    return Net(), (torch.randn(batch_size, 4),)\n")
    proc = run_cli("model.v2.py", "--isolated", "--no-cache", "--confirm", "--backend", "emulated",
                   "--output-format", "json", "--timeout", "240", cwd=tmp_path, timeout=400)
    findings = json.loads(proc.stdout)
    assert [f["confirmation"]["status"] for f in findings if f["code"] == "DP101"] == ["confirmed"], findings
    assert not [f for f in findings if f["code"] == "DP003"]


class AutocastInside(torch.nn.Module):
    """Enters CUDA autocast inside forward, the fix DP707 recommends."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return self.fc(x)


def test_cuda_autocast_runs_on_the_emulation_and_its_rounding_is_not_a_difference():
    # Before: "Torch not compiled with CUDA enabled" on a single device (not-run); then
    # float32 gradients of a bf16 forward compared at float32 tolerance (a false DP801).
    torch.manual_seed(0)
    report = check(AutocastInside(), (torch.randn(8, 64),), backend="emulated")
    assert not report.errors and not report.reference_failures, report.errors
    assert not report.observations, [o.evidence for o in report.observations]


def test_replicas_get_autocast_enabled_but_not_its_dtype_as_on_gpus():
    # Measured on 2 GPUs (torch 2.11): under torch.autocast("cuda", dtype=torch.bfloat16) around
    # the wrapper, the replicas compute in float16.
    from dpcheck.harness import emulation as em

    with em.emulated_cuda(2):
        model = em.place_module(torch.nn.Linear(4, 4), 0)
        x = em.place(torch.randn(4, 4), 0)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            alone = model(x)
            inputs, kwargs = em.scatter_kwargs((x,), {}, [0, 1], 0)
            outputs = em.parallel_apply(em.replicate(model, [0, 1]), inputs, kwargs, [0, 1])
    assert alone.dtype == torch.bfloat16
    assert [o.dtype for o in outputs] == [torch.float16, torch.float16]


class LossAndLogits(torch.nn.Module):
    """Returns a dict with the mean loss over its samples, as transformers models do with labels."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x, y):
        return {"loss": ((self.fc(x).squeeze(-1) - y) ** 2).mean()}


def test_an_uneven_chunk_loss_mean_is_the_scalar_losss_evidence_not_a_gradient_difference():
    report = run(LossAndLogits, lambda b: (torch.randn(b, 4), torch.randn(b)))
    # At batch 3 the chunks are (2, 1): `loss.mean()` weights them equally and the gradient differs ...
    assert K.GRADS_DIFFER not in kinds(report), [o.evidence for o in report.observations]
    weighted = [o for o in report.observations if o.kind == K.LOSS_MEAN_WEIGHTS_CHUNKS_EQUALLY]
    # ... which the probe (weighting the per-replica losses by chunk size) attributes to the loss.
    assert [o.batch for o in weighted] == [3] and weighted[0].output_path == "output['loss']"


class LossOfBatchMean(torch.nn.Module):
    """The loss depends on the whole batch's mean: no per-replica weighting recovers it."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x):
        out = self.fc(x - x.mean(0))
        return (out ** 2).mean()


def test_a_gradient_difference_that_weighting_does_not_explain_is_still_reported():
    report = run(LossOfBatchMean, lambda b: (torch.randn(b, 4),))
    assert K.GRADS_DIFFER in kinds(report), [o.evidence for o in report.observations]


def test_argument_observations_name_the_forward_parameter():
    report = run(SequenceFirst, lambda b: (torch.randn(5, b, 4),))
    split = [o for o in report.observations if o.kind == K.ARGUMENT_NOT_BATCH_SPLIT]
    assert split and split[0].argument == "x", [(o.kind, o.argument) for o in report.observations]


class TrainingBranch(torch.nn.Module):
    """Counts training steps in a plain attribute, only under `if self.training:`."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)
        self.steps = 0

    def forward(self, x):
        if self.training:
            self.steps += 1
        return self.drop(self.fc(x))


def test_the_example_runs_in_training_mode_by_default_with_dropout_neutralised():
    report = run(TrainingBranch, lambda b: (torch.randn(b, 4),))
    assert report.mode == "training"
    # The training-only branch ran: its lost state is seen (in eval() mode it never ran) ...
    assert any(o.kind == K.STATE_LOST_ON_REPLICA and o.attr == "steps" for o in report.observations)
    # ... and dropout, off on both sides, neither makes the outputs differ nor stops the comparison.
    assert K.VALUES_DIFFER not in kinds(report) and not report.errors, (report.errors, report.observations)


def test_an_example_that_returns_an_eval_model_runs_in_eval_mode():
    report = run(lambda: TrainingBranch().eval(), lambda b: (torch.randn(b, 4),))
    assert report.mode == "eval"
    assert not any(o.attr == "steps" for o in report.observations)


class NormalisedCounter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.bn(self.conv(x)).mean((2, 3))


def test_batchnorm_statistics_are_measured_per_replica_and_kept_out_of_the_comparison():
    report = run(NormalisedCounter, lambda b: (torch.randn(b, 3, 6, 6),))
    per_replica = [o for o in report.observations if o.kind == K.BATCHNORM_STATS_PER_REPLICA]
    assert len(per_replica) == 1 and per_replica[0].class_name == "NormalisedCounter", report.observations
    assert "`bn`" in per_replica[0].evidence
    # Per-chunk normalisation is DataParallel's expected behaviour: no output, gradient or
    # running-statistics difference is reported for it ...
    assert not {K.VALUES_DIFFER, K.GRADS_DIFFER, K.STATE_DIFFERS} & kinds(report), report.observations
    # ... so the other hazard of the same model stays visible.
    assert any(o.kind == K.STATE_LOST_ON_REPLICA and o.attr == "calls" for o in report.observations)


class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) + torch.randn_like(x)  # random whatever the mode: not a dropout layer


def test_randomness_that_is_not_dropout_is_found_once_and_stops_the_value_comparison():
    report = run(Noisy, lambda b: (torch.randn(b, 4),))
    assert [e for e in report.errors if "random" in e] and "training mode" in report.errors[0], report.errors
    assert not {K.VALUES_DIFFER, K.GRADS_DIFFER} & kinds(report), report.observations


def test_each_emulated_device_draws_from_its_own_generator_seeded_as_every_gpus_is():
    from dpcheck.harness import emulation as em
    from dpcheck.harness.runner import make_backend

    backend = make_backend("emulated", 2)
    with em.emulated_cuda(2):
        backend.seed(3)
        cpu_before = torch.random.get_rng_state()
        on_0 = torch.randn(5, device="cuda:0")
        on_1 = torch.randn(5, device="cuda:1")
        noise_1 = torch.randn_like(on_1)
        # Identically seeded GPUs: each device's first draw is the same; the CPU's did not move.
        assert on_0.tolist() == on_1.tolist() and on_1.device == torch.device("cuda", 1)
        assert torch.equal(torch.random.get_rng_state(), cpu_before)
        assert noise_1.tolist() != on_1.tolist()  # device 1's generator moved on
        assert torch.randn(5, device="cuda:0").tolist() == noise_1.tolist()  # device 0's by one draw only
        cpu = torch.randn(5)
    torch.manual_seed(3)
    assert torch.equal(cpu, torch.randn(5))


class DrawReachesOnlyTheGradient(torch.nn.Module):
    """Draws a vector each call (a power iteration's first one) that changes no output value, only
    the gradient of `scale` (as a spectral norm's draw, under BatchNorm, changes the gradients
    more than the outputs): the randomness probe, which compares outputs, finds nothing random."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        u = torch.randn(4, device=x.device)
        pull = (self.scale * u).sum()
        return self.fc(x) + (pull - pull.detach())


def test_a_draw_in_forward_is_the_same_draw_in_both_runs_on_every_device():
    # Both runs draw with the generators seeded alike, replica 1 from device 1's own: the
    # gradients match. (They used to draw from wherever the one generator stood: "the gradient of
    # `scale` differs", as the cuda backend confirmed on fixtures/dp101/flagged_private_torch_base.)
    report = run(DrawReachesOnlyTheGradient, lambda b: (torch.randn(b, 4),))
    assert not report.stochastic
    assert not {K.VALUES_DIFFER, K.GRADS_DIFFER} & kinds(report), [o.evidence for o in report.observations]


class ResidualBlock(torch.nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(planes)
        self.conv2 = torch.nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = torch.nn.Sequential(torch.nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                  torch.nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class SmallResNet(torch.nn.Module):
    """resnet18's shape at a quarter of its width: stem, 4 stages of 2 residual blocks (20
    BatchNorm layers, layer4 at 2x2 for 64x64 images), adaptive pooling, a linear head."""

    def __init__(self, base=16):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, base, 7, 2, 3, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(base)
        self.maxpool = torch.nn.MaxPool2d(3, 2, 1)
        stages, inplanes = [], base
        for i, width in enumerate([base, base * 2, base * 4, base * 8]):
            stages.append(torch.nn.Sequential(ResidualBlock(inplanes, width, 1 if i == 0 else 2),
                                              ResidualBlock(width, width)))
            inplanes = width
        self.stages = torch.nn.Sequential(*stages)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(inplanes, 10)
        for m in self.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.stages(self.maxpool(torch.relu(self.bn1(self.conv1(x)))))
        return self.fc(torch.flatten(self.pool(x), 1))


def test_float32_rounding_of_a_gradient_summed_over_the_batch_is_not_a_difference():
    # resnet18 in training mode on the emulation confirmed "the gradient of `conv1.weight`
    # differs" at batch 3 (chunks 2 and 1): the same computation in float64 matches to 1e-13;
    # float32 sums the batch in another order and the cancelling elements keep the error of
    # the large terms. Batch 3 is the one that showed it.
    report = run(SmallResNet, lambda b: (torch.randn(b, 3, 64, 64),), sizes=(3,))
    assert report.compared == [3], report.errors
    assert K.GRADS_DIFFER not in kinds(report), [o.evidence for o in report.observations]
    # The tolerance scales with each gradient tensor's magnitude; a difference at that scale
    # is still one.
    from dpcheck.harness.runner import _close
    gradient = torch.tensor([100.0, 1.0, -0.01])
    assert _close(gradient, gradient + torch.tensor([0.0, 0.0, 0.05]), summed=True)
    assert not _close(gradient, gradient + torch.tensor([0.0, 0.0, 0.5]), summed=True)
    assert not _close(gradient, gradient + torch.tensor([0.0, 0.0, 0.05]))


def test_the_rounding_of_a_gradient_that_cancels_to_zero_is_not_a_difference():
    # A Linear before a BatchNorm whose output the harness sums: its gradient is zero but for
    # rounding, whose size follows the backward's other gradients (hundreds here), not its own
    # largest element. Another build of torch, on 4 emulated devices, put that rounding above
    # the absolute tolerance (fixtures/dp604/flagged_pooled_batchnorm.py: "the gradient of
    # `head.2.weight` differs"). A difference at the scale of the model's gradients still is one.
    from dpcheck.harness.runner import RunReport, _compare_grads

    def compared(dp_tiny):
        ref = {"conv.weight": torch.tensor([392.0, -120.0]), "head.weight": torch.tensor([8e-6, -3e-6])}
        dp = {"conv.weight": torch.tensor([392.0, -120.0]), "head.weight": dp_tiny}
        report = RunReport("emulated", 4)
        _compare_grads(ref, dp, 8, None, report)
        return kinds(report)

    assert K.GRADS_DIFFER not in compared(torch.tensor([2e-4, -1e-4]))  # rounding: old code said it differs
    assert K.GRADS_DIFFER in compared(torch.tensor([0.5, -3e-6]))  # a thousandth of the largest: a difference
    assert K.GRADS_DIFFER in compared(torch.tensor([8e-6]))  # another shape


class ShapeKeyedCache(torch.nn.Module):
    """A mask cache keyed by shape, not device: the entry one replica builds on its device is
    read by the others."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.masks = {}

    def forward(self, x):
        key = x.shape[1]
        if key not in self.masks:
            self.masks[key] = torch.ones(key, key, device=x.device).tril()
        return self.masks[key] @ self.fc(x)


def test_a_shared_cache_entry_read_on_another_device_is_seen_directly_every_run():
    # The emulation runs the replicas in order, so replica 1 always finds replica 0's entry
    # (real GPUs show it as the threads' timing falls): the same verdict every run.
    for _ in range(3):
        report = run(ShapeKeyedCache, lambda b: (torch.randn(b, 5, 4),), sizes=(4,))
        direct = [o for o in report.observations if o.kind == K.SHARED_CONTAINER_TENSOR_ON_OTHER_DEVICE]
        assert len(direct) == 1, [o.evidence for o in report.observations]
        assert direct[0].attr == "masks" and direct[0].class_name == "ShapeKeyedCache"
        assert "cuda:0" in direct[0].evidence and "replica on cuda:1" in direct[0].evidence
        # The device mismatch it caused names it as its cause.
        mismatch = [o for o in report.observations if o.kind == K.DEVICE_MISMATCH]
        assert len(mismatch) == 1 and mismatch[0].details["cause"] == {
            "kind": K.SHARED_CONTAINER_TENSOR_ON_OTHER_DEVICE.value, "path": "masks"}


class DeviceKeyedCache(ShapeKeyedCache):
    def forward(self, x):
        key = (x.shape[1], x.device)
        if key not in self.masks:
            self.masks[key] = torch.ones(x.shape[1], x.shape[1], device=x.device).tril()
        return self.masks[key] @ self.fc(x)


def test_a_cache_keyed_by_device_is_not_a_shared_entry_read_elsewhere():
    report = run(DeviceKeyedCache, lambda b: (torch.randn(b, 5, 4),), sizes=(4,))
    assert not {K.SHARED_CONTAINER_TENSOR_ON_OTHER_DEVICE, K.DEVICE_MISMATCH} & kinds(report), report.observations


def test_the_cuda_backend_runs_torchs_replica_threads_in_the_emulations_order():
    # torch's own parallel_apply (its accelerator calls stubbed, so it runs here): replica 0 is
    # slower, and concurrently replica 1 finishes first; in order, replica 1 starts after it.
    import contextlib
    import time
    from unittest import mock

    from torch.nn.parallel import parallel_apply

    from dpcheck.harness.runner import _replica_threads_in_order

    class Slow(torch.nn.Module):
        def __init__(self, delay, finished):
            super().__init__()
            self.delay, self.finished = delay, finished

        def forward(self, x):
            time.sleep(self.delay)
            self.finished.append(self.delay)
            return x

    finished = []
    replicas = [Slow(0.2, finished), Slow(0.0, finished)]
    stub = contextlib.nullcontext
    with mock.patch.object(torch.accelerator, "is_available", lambda: True), \
            mock.patch.object(torch.accelerator, "current_stream", lambda device=None: stub()), \
            mock.patch.object(torch.accelerator, "current_accelerator", lambda *a: torch.device("cpu")), \
            mock.patch.object(torch.accelerator, "device_index", lambda device: stub()):
        parallel_apply(replicas, [torch.ones(1), torch.ones(1)], None, [0, 1])
        assert finished == [0.0, 0.2]  # the stub works: torch's threads ran at once
        finished.clear()
        with _replica_threads_in_order():
            parallel_apply(replicas, [torch.ones(1), torch.ones(1)], None, [0, 1])
        assert finished == [0.2, 0.0]


class SetUpPerCall(torch.nn.Module):
    """recurrent_gemma's `_setup_cache`: forward builds its state before reading it, every call;
    beside it, a counter (read, then written) and a stash (written for the caller, never read)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.calls = 0
        self.last = None

    def _setup_cache(self, batch, device):
        self.conv_state = torch.zeros(batch, 8, device=device)

    def forward(self, x):
        self._setup_cache(x.shape[0], x.device)
        self.calls += 1
        out = self.proj(x) + self.conv_state
        self.last = out.detach()
        return out


def test_state_that_forward_sets_up_before_reading_on_every_call_is_not_lost_state():
    report = run(SetUpPerCall, lambda b: (torch.randn(b, 8),), sizes=(4,))
    lost = {o.attr for o in report.observations if o.kind == K.STATE_LOST_ON_REPLICA}
    # conv_state is rebuilt and read within each call; the counter and the stash carry across calls.
    assert lost == {"calls", "last"}, [o.evidence for o in report.observations]
    # The probe call leaves the model's class as it was.
    from dpcheck.harness.runner import _scratch_each_call, make_backend
    model = SetUpPerCall()
    model(torch.randn(2, 8))
    assert _scratch_each_call(model, ["conv_state", "calls", "last"], (torch.randn(2, 8),), {},
                              make_backend("emulated", 2)) == {"conv_state"}
    assert type(model) is SetUpPerCall


class ResetOnlyWhenTraining(torch.nn.Module):
    """Resets its total in the training branch only; the eval branch adds to what the last call
    left, which under DataParallel stayed on a replica. It returns the total it keeps."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.total = 0

    def forward(self, x):
        if self.training:
            self.total = 0
        self.total += self.fc(x).pow(2).mean(1)
        return self.total


def test_state_written_first_only_in_training_mode_is_lost_state_in_eval_mode():
    report = run(ResetOnlyWhenTraining, lambda b: (torch.randn(b, 4),))
    # Scratch in training mode (written, then read back); carried between calls in eval mode.
    lost = [o for o in report.observations if o.kind == K.STATE_LOST_ON_REPLICA]
    assert [(o.attr, o.mode) for o in lost] == [("total", "eval")], [o.evidence for o in report.observations]
    # The scratch probe's extra call adds in place to the tensor the step returned: the outputs
    # are compared as the step returned them, and they match (both runs start from 0).
    assert K.VALUES_DIFFER not in kinds(report), [o.evidence for o in report.observations]


class _Body(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


class _FunctionalHarness(torch.nn.Module):
    """Calls torch's functional data_parallel over every device inside its own forward."""

    def __init__(self):
        super().__init__()
        self.body = _Body()

    def forward(self, x):
        return torch.nn.parallel.data_parallel(self.body, x)


class _ModuleHarness(torch.nn.Module):
    """Builds a DataParallel of its own submodule, as some model code does."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.DataParallel(_Body())

    def forward(self, x):
        return self.body(x)


def test_data_parallel_called_by_model_code_runs_on_the_emulated_devices():
    """As on real GPUs (issue 12): on one device (model on cuda:0) the model's own data_parallel /
    DataParallel replicates over every device and gathers on cuda:0; torch's CUDA primitives
    (torch._C._scatter, Broadcast) used to fail it on a CPU build."""
    from dpcheck.harness import emulation as em

    x = torch.randn(6, 4)
    for harness in (_FunctionalHarness, _ModuleHarness):
        torch.manual_seed(0)
        model = harness()
        expected = model.body(x) if harness is _FunctionalHarness else model.body.module(x)
        with em.emulated_cuda(2):
            em.place_module(model, 0)
            out = model(em.place(x, 0))
            assert out.device == torch.device("cuda", 0)
            out.sum().backward()
        torch.testing.assert_close(out.detach(), expected.detach())
        assert next(model.parameters()).grad is not None


def test_data_parallel_over_a_module_on_another_device_raises_torchs_error():
    """`module must have its parameters and buffers on device cuda:0 (device_ids[0])`: the check in
    torch's data_parallel, on the emulated devices, for a module that sits on cuda:1."""
    from dpcheck.harness import emulation as em

    model = _FunctionalHarness()
    with em.emulated_cuda(2):
        em.place_module(model, 1)
        with pytest.raises(RuntimeError, match=r"on device cuda:0 \(device_ids\[0\]\).*cuda:1"):
            model(em.place(torch.randn(6, 4), 1))
        with pytest.raises(RuntimeError, match=r"All tensors must be on devices\[0\]: 0"):
            em.replicate(model, [0, 1])
