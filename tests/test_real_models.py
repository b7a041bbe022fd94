"""The real-model suite: `dpcheck --confirm` on real library models, with the verdicts written down.

Each file under tests/real_models/ builds one model family with random weights and small
inputs (a module-level `dpcheck_example(batch_size)`, or `dpcheck_example_<ClassName>`
functions in the examples file named by tests/real_models/dpcheck.toml). Each file runs
in its own `dpcheck --confirm --output-format json` process, and the test asserts what
really happens to that model under torch.nn.DataParallel (measured on 2 H100s with
tests/real_models/ground_truth.py, torch 2.11):

* a clean model has no confirmed error, and its run was compared (no file-level not-run);
* each true hazard is confirmed by exactly one finding with its code (and, where the
  hazard is a line in the file, at that line), with evidence about that hazard;
* no other error is confirmed.

Where the harness gives a wrong verdict today, the expectation stays correct and the case
is marked `xfail(strict=True)` naming the harness defect, so it flips when that is fixed.

Backends: the emulation always; real GPUs (`@pytest.mark.gpu`) where there are enough.
    DPCHECK_REAL_MODELS_BACKEND=cuda|emulated   only this backend (default: both, cuda if GPUs)
    DPCHECK_REAL_MODELS_DEVICES=4               devices to run on (default 2)
    DPCHECK_REAL_MODELS_RESULTS=DIR             judge saved runs instead of running: DIR holds
                                                <file stem>.<backend>.json, the JSON output of
                                                `dpcheck --confirm` on that file (a GPU run
                                                brought back to judge on a machine without GPUs)
torchvision's wheels are CUDA builds whose compiled operators do not load beside the CPU torch
CI installs; tests/support/torchvision_cpu_ops/ then stands in for the one operator its models
need (`nms`, in PyTorch) so torchvision and timm import and run, in this process and in the
children (PYTHONPATH). Where the compiled operators load, it changes nothing. A case whose
library does not import at all skips with the reason.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass

import pytest
from conftest import ROOT, run_cli

torch = pytest.importorskip("torch")

MODELS = ROOT / "tests" / "real_models"
DEVICES = int(os.environ.get("DPCHECK_REAL_MODELS_DEVICES", "2"))
ONLY_BACKEND = os.environ.get("DPCHECK_REAL_MODELS_BACKEND")
SAVED_RESULTS = os.environ.get("DPCHECK_REAL_MODELS_RESULTS")
TORCHVISION_CPU_OPS = ROOT / "tests" / "support" / "torchvision_cpu_ops"
FILE_NOT_RUN = "DP003"  # the file-level finding of a confirmation that could not compare anything


@dataclass(frozen=True)
class Hazard:
    """One true DataParallel hazard of a case, and how a correct run confirms it."""

    name: str
    codes: frozenset[str]  # a confirming finding has one of these codes
    model: str | None = None  # the class it belongs to, in a file with several models
    line: str | None = None  # source text of the line a static finding must be reported at
    evidence: str | None = None  # regex the confirmation's evidence must match
    max_count: int = 1  # confirmed findings allowed for it (an occurrence per argument, ...)
    defect: str | None = None  # the harness defect that makes this hazard's verdict wrong today


@dataclass(frozen=True)
class Case:
    id: str
    file: str
    needs: tuple[str, ...] = ()
    hazards: tuple[Hazard, ...] = ()
    # (code, line, defect or None): static findings whose line cannot run under DataParallel
    not_run: tuple[tuple[str, str, str | None], ...] = ()
    extra_defect: str | None = None  # the harness defect behind an unexpected confirmed error today


SCALAR_LOSS = ("the loss, a 0-dim tensor in the output, is gathered into one value per replica "
               "(torch's gather warns; HF's Trainer calls .mean() on it)")
# At an uneven batch, `.mean()` of the per-replica losses weights the chunks equally and the
# gradients differ: that is the scalar loss's evidence (probed by weighting the losses by chunk
# size), not a separate "gradient differs" finding.

CASES = (
    Case("resnet18", "torchvision_resnet18.py", needs=("torchvision",)),
    Case("mobilenet_v3_small", "torchvision_mobilenet_v3_small.py", needs=("torchvision",)),
    Case("fasterrcnn_mobilenet_v3_large_fpn", "torchvision_fasterrcnn.py", needs=("torchvision",), hazards=(
        # model(images, targets): scatter chunks each image along its channels and each target
        # dict's boxes, so every replica gets all images with 2 or 1 channels and fails in
        # normalisation; the dict of 0-dim losses is never reached under DataParallel.
        Hazard("list of images (and of target dicts) split element by element", frozenset({"DP805"}),
               evidence=r"argument [01]", max_count=2),
    )),
    Case("vit_tiny_patch16_224", "timm_vit_tiny.py", needs=("timm",)),
    Case("convnext_atto", "timm_convnext_atto.py", needs=("timm",)),
    Case("bert_tiny", "transformers_bert.py", needs=("transformers",), hazards=(
        Hazard(SCALAR_LOSS, frozenset({"DP401", "DP802"}), evidence=r"loss"),
    )),
    Case("gpt2_tiny", "transformers_gpt2.py", needs=("transformers",), hazards=(
        Hazard(SCALAR_LOSS, frozenset({"DP401", "DP802"}), evidence=r"loss"),
    )),
    Case("word_language_model", "word_language_model.py", hazards=(
        # RNNModel(input (T, B), hidden ((L, B, H), (L, B, H))): scatter splits the input along
        # time and the hidden state along layers; replica 0 raises "Expected hidden[0] size
        # (2, 4, 16), got [1, 4, 16]" on real GPUs.
        Hazard("sequence-first input split along time", frozenset({"DP501"}), model="RNNModel",
               line="output, hidden = self.rnn(embedded, hidden)", evidence=r"^(?!.*Expected hidden)"),
        # The hidden-state error at the same line names `hidden`: DP502's symptom, not DP501's.
        Hazard("hidden state (layers, B, H) split along layers", frozenset({"DP502"}), model="RNNModel",
               line="output, hidden = self.rnn(embedded, hidden)", evidence=r"argument 1"),
        # TransformerModel(src (T, B)): split along time, each replica builds a causal mask and
        # positions for its half: the output has the same shape and different values.
        Hazard("sequence-first input split along time (nn.Transformer's encoder)",
               frozenset({"DP501", "DP803"}), model="TransformerModel"),
        # Its evidence is the lost `src_mask` alone: the values that differ are the split's.
        Hazard("cached causal mask lost with the replica, rebuilt every call (cost only)",
               frozenset({"DP101"}), model="TransformerModel",
               line="self.src_mask = self.causal_mask(len(src)).to(src.device)",
               evidence=r"^(?!.*output differs).*src_mask"),
    ), not_run=(
        # The hidden state returned (layers, B, H) would be gathered along layers (a true DP404),
        # but replica 0 raises in self.rnn first: the return line never runs under DataParallel.
        ("DP404", "return F.log_softmax(logits.view(-1, self.ntoken), dim=1), hidden", None),
    )),
)


def backends():
    params = []
    if ONLY_BACKEND in (None, "emulated"):
        params.append(pytest.param("emulated", id="emulated"))
    if ONLY_BACKEND in (None, "cuda"):
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if SAVED_RESULTS:
            gpus = DEVICES  # the runs were made where the GPUs were
        params.append(pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
            gpus < DEVICES, reason=f"needs {DEVICES} CUDA GPUs (DPCHECK_REAL_MODELS_DEVICES), found {gpus}")]))
    return params


@functools.cache
def _stand_in_for_torchvision_ops() -> None:
    """Install tests/support/torchvision_cpu_ops in this process (the children get it through
    PYTHONPATH, see `confirm`)."""
    spec = importlib.util.spec_from_file_location("torchvision_cpu_ops", TORCHVISION_CPU_OPS / "sitecustomize.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


@functools.cache
def unimportable(module: str) -> str | None:
    """Why `module` cannot be used here (torchvision's wheel fails to load beside another torch
    with a RuntimeError, not an ImportError), or None."""
    _stand_in_for_torchvision_ops()
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure to import means: skip with the reason
        return f"{module} does not import beside torch {torch.__version__}: {type(exc).__name__}: {exc}"[:300]
    return None


@functools.cache
def confirm(file: str, backend: str) -> tuple[int, str, str]:
    """One `dpcheck --confirm` child process for one model file (run once, even when it fails)."""
    proc = run_cli(MODELS / file, "--config", MODELS / "dpcheck.toml", "--confirm", "--backend", backend,
                   "--devices", DEVICES, "--timeout", 600, "--output-format", "json", "--no-cache", timeout=900,
                   env={"PYTHONPATH": os.pathsep.join(filter(None, [str(TORCHVISION_CPU_OPS), os.environ.get("PYTHONPATH")]))})
    return proc.returncode, proc.stdout, proc.stderr


def results(case: Case, backend: str) -> list[dict]:
    if SAVED_RESULTS:
        saved = os.path.join(SAVED_RESULTS, f"{case.file.removesuffix('.py')}.{backend}.json")
        if not os.path.exists(saved):
            pytest.skip(f"no saved run {saved}")
        with open(saved) as f:
            return json.load(f)
    for module in case.needs:
        reason = unimportable(module)
        if reason:
            pytest.skip(reason)
    returncode, stdout, stderr = confirm(case.file, backend)
    assert returncode in (0, 1), stderr[-3000:]
    return json.loads(stdout)


@functools.cache
def class_rows(file: str) -> dict[str, range]:
    tree = ast.parse((MODELS / file).read_text())
    return {node.name: range(node.lineno, node.end_lineno + 1) for node in tree.body if isinstance(node, ast.ClassDef)}


def row_of(file: str, text: str) -> int:
    rows = [i for i, line in enumerate((MODELS / file).read_text().splitlines(), 1) if line.strip() == text]
    assert len(rows) == 1, f"{file}: {text!r} is on lines {rows}"
    return rows[0]


def belongs(finding: dict, case: Case, model: str | None) -> bool:
    """Is the finding about ``model``: inside its class, or (a dynamic finding) naming it?"""
    if model is None:
        return True
    if finding["location"]["row"] in class_rows(case.file)[model]:
        return True
    return re.search(rf"\bmodel: {model}\b", finding["confirmation"]["evidence"] or "") is not None


def confirming(findings: list[dict], case: Case, hazard: Hazard) -> list[dict]:
    row = row_of(case.file, hazard.line) if hazard.line else None
    return [f for f in findings if f["code"] in hazard.codes and f["confirmation"]["status"] == "confirmed"
            and (row is None or f["location"]["row"] == row) and belongs(f, case, hazard.model)]


def show(findings: list[dict]) -> str:
    return "\n".join(f"  {f['code']} row {f['location']['row']} [{f['confirmation']['status']}] {f['message'][:120]}"
                     f" | {f['confirmation']['evidence'][:200]}" for f in findings) or "  (no findings)"


def xfail_if(request, defect: str | None):
    if defect:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"harness defect: {defect}"))


HAZARDS = [pytest.param(case, hazard, id=f"{case.id}-{'-'.join(sorted(hazard.codes))}-{hazard.model or ''}".rstrip("-"))
           for case in CASES for hazard in case.hazards]


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("case,hazard", HAZARDS)
def test_each_true_hazard_is_confirmed_once_with_its_code(case, hazard, backend, request):
    findings = results(case, backend)
    xfail_if(request, hazard.defect)
    hits = confirming(findings, case, hazard)
    assert 1 <= len(hits) <= hazard.max_count, (
        f"{case.file}: {hazard.name}: expected {'one' if hazard.max_count == 1 else f'1-{hazard.max_count}'} "
        f"confirmed {sorted(hazard.codes)}, got {len(hits)}:\n{show(findings)}")
    if hazard.evidence:
        for hit in hits:
            assert re.search(hazard.evidence, hit["confirmation"]["evidence"]), (
                f"{case.file}: {hazard.name}: evidence does not match {hazard.evidence!r}:\n{show(hits)}")


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_no_other_error_is_confirmed(case, backend, request):
    """Clean models confirm no error at all; hazardous ones only their hazards'."""
    findings = results(case, backend)
    xfail_if(request, case.extra_defect)
    expected = [id(f) for hazard in case.hazards for f in confirming(findings, case, hazard)]
    extra = [f for f in findings if f["confirmation"]["status"] == "confirmed" and f["severity"] == "error"
             and id(f) not in expected]
    assert not extra, f"{case.file}: unexpected confirmed errors:\n{show(extra)}\nall findings:\n{show(findings)}"


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_the_model_was_compared(case, backend):
    """A run that compared nothing must say so (a file-level not-run), never pass as clean."""
    findings = results(case, backend)
    not_run = [f for f in findings if f["code"] == FILE_NOT_RUN]
    assert not not_run, f"{case.file}: the model was not compared:\n{show(not_run)}"


NOT_RUN = [pytest.param(case, code, line, defect, id=f"{case.id}-{code}")
           for case in CASES for code, line, defect in case.not_run]


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("case,code,line,defect", NOT_RUN)
def test_findings_after_the_point_of_failure_are_not_run(case, code, line, defect, backend, request):
    findings = results(case, backend)
    row = row_of(case.file, line)
    at_line = [f for f in findings if f["code"] == code and f["location"]["row"] == row]
    assert at_line, f"{case.file}: no static {code} at line {row}:\n{show(findings)}"
    xfail_if(request, defect)
    assert all(f["confirmation"]["status"] == "not-run" for f in at_line), show(at_line)
