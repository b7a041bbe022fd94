"""`--confirm`: run each checked file's model under the harness and mark the static findings.

Each file runs in its own child process (`python -m dpcheck.harness.child`) with a time
limit, so a model that hangs, exits, crashes or leaks costs that file's result only.
Every static finding in the file gets `confirmation = {status, backend, evidence}`:

* `confirmed`: an observation of the run explains it (an exception at its line, a lost
  attribute it names, a scalar output it predicted, ...);
* `not-reproduced`: its line ran under DataParallel and nothing it predicts happened;
* `not-run`: the harness could not run it (no example, constructor failed, timeout) or
  its line never executed, with the reason.

Observations no static finding explains become dynamic findings (DP8xx).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from dpcheck.constants import CHILD_RESULT_MARKER
from dpcheck.findings import Confirmation, Finding

# Static codes whose hazard is a device placement error.
_DEVICE_CODES = frozenset({"DP201", "DP202", "DP301", "DP302", "DP303", "DP106", "DP203"})
_SCRIPT_CODES = ("DP7",)
_NOT_EXERCISED = {"DP602": "BatchNorm statistics are informational; the harness runs in eval mode"}


def run_child(path: Path, backend: str, devices: int | None, timeout: float, examples: Path | None) -> dict:
    cmd = [sys.executable, "-m", "dpcheck.harness.child", str(path), "--backend", backend]
    if devices:
        cmd += ["--devices", str(devices)]
    if examples:
        cmd += ["--examples", str(examples)]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"the model did not finish within {timeout:g} s (--timeout)"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(CHILD_RESULT_MARKER):
            try:
                return json.loads(line[len(CHILD_RESULT_MARKER):])
            except ValueError:
                break
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    if proc.returncode < 0:
        return {"error": f"the model process was killed by signal {-proc.returncode} ({tail})"}
    return {"error": f"the model process exited with status {proc.returncode} before reporting ({tail})"}


def confirm_findings(findings: list[Finding], files: Sequence[Path], settings, options) -> list[Finding]:
    from dpcheck.analysis.notebook import is_notebook

    files = [p for p in files if not is_notebook(p)]  # a notebook is not a module to import: not run
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(os.path.abspath(f.filename), []).append(f)
    out: list[Finding] = []
    # Children are separate processes: run a few at once (on real GPUs at most 4, which
    # share the devices; each measures its own peak memory).
    from concurrent.futures import ThreadPoolExecutor

    from dpcheck.engine import default_jobs
    workers = getattr(options, "jobs", None) or default_jobs()
    if settings.backend != "emulated":
        workers = min(workers, 4)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda p: run_child(Path(p), settings.backend, settings.devices,
                                                    settings.timeout, settings.examples), files))
    for path, result in zip(files, results):
        static = by_file.pop(os.path.abspath(path), [])
        out.extend(attribute(static, result, str(path)))
    for leftover in by_file.values():  # stdin and the like: nothing to run
        out.extend(replace(f, confirmation=_status("not-run", "none", "the file was not run")) for f in leftover)
    out.sort(key=lambda f: (f.filename, f.cell or 0, f.row, f.col, f.code))
    return out


def _status(status: str, backend: str, evidence: str) -> Confirmation:
    return Confirmation(status, backend, evidence)


def attribute(static: list[Finding], result: dict, filename: str) -> list[Finding]:
    """Mark each static finding from the child's result, and add dynamic findings."""
    backend = result.get("backend", "none")
    devices = result.get("devices")
    label = f"{backend}" + (f", {devices} devices" if devices else "")
    if result.get("error") or not result.get("models"):
        reason = result.get("error") or "no nn.Module subclass in this file to run"
        return [replace(f, confirmation=_status("not-run", backend, reason)) for f in static]
    executed = set(result.get("executed_lines", []))
    ran = [m for m in result["models"] if "report" in m]
    if not ran:
        reasons = "; ".join(f"{m['label']}: {m.get('not_run')}" for m in result["models"])
        return [replace(f, confirmation=_status("not-run", backend, reasons)) for f in static]

    compared = [m for m in ran if not all(e.startswith("building the model") for e in m["report"]["errors"])
                or not m["report"]["errors"]]
    if not compared:
        reasons = "; ".join(dict.fromkeys(e for m in ran for e in m["report"]["errors"]))
        return [replace(f, confirmation=_status("not-run", label, reasons)) for f in static]
    observations = [(o, m) for m in ran for o in m["report"]["observations"]]
    failures = [(o, m) for m in ran for o in m["report"]["reference_failures"]]
    explained: set[int] = set()
    marked: list[Finding] = []
    for finding in static:
        evidence = _match(finding, observations, failures, explained,
                          finding.row in executed or _statement_ran(finding, executed))
        if finding.code.startswith(_SCRIPT_CODES):
            status = _status("not-run", label, "training-script rules are not exercised by the harness")
        elif finding.code in _NOT_EXERCISED:
            status = _status("not-run", label, _NOT_EXERCISED[finding.code])
        elif evidence:
            status = _status("confirmed", label, evidence)
        elif finding.row not in executed and not _statement_ran(finding, executed):
            skipped = "".join(f"; {m['label']} was not run: {m['not_run']}" for m in result["models"]
                              if "not_run" in m)
            status = _status("not-run", label, f"line {finding.row} did not run in the example "
                             f"({', '.join(m['inputs'] for m in ran)}){skipped}")
        else:
            status = _status("not-reproduced", label, "the line ran under DataParallel and the run matched "
                             f"the single-device run (batches {ran[0]['report']['batches']})")
        marked.append(replace(finding, confirmation=status))
    marked.extend(_dynamic(observations, explained, filename, label))
    return marked


def _statement_ran(finding: Finding, executed: set[int]) -> bool:
    return any(finding.row <= line <= finding.end_row for line in executed)


_ATTR = re.compile(r"`self\.(\w+)")


def _match(finding: Finding, observations, failures, explained: set[int], ran: bool) -> str | None:
    """Evidence for ``finding``: an observation at its line, or (when its line ran) one of the
    kind it predicts: its rule code, the attribute it names, a device error for device rules."""
    attrs = set(_ATTR.findall(finding.message))
    hits = []
    for index, (obs, _model) in enumerate(observations):
        line_hit = obs.get("line") is not None and finding.row <= obs["line"] <= finding.end_row
        code_hit = finding.code in obs.get("codes", [])
        attr_hit = obs.get("attr") is not None and obs["attr"] in attrs
        device_hit = finding.code in _DEVICE_CODES and "same device" in obs["evidence"]
        if line_hit or (ran and ((code_hit and (obs.get("attr") is None or attr_hit)) or device_hit)):
            hits.append(obs["evidence"])
            explained.add(index)
    for obs, _model in failures:
        line_hit = obs.get("line") is not None and finding.row <= obs["line"] <= finding.end_row
        device_hit = finding.code in _DEVICE_CODES and "same device" in obs["evidence"]
        if line_hit or (ran and device_hit):
            hits.append(obs["evidence"])
    if not hits:
        return None
    unique = list(dict.fromkeys(hits))
    return unique[0] + (f" (and {len(unique) - 1} more)" if len(unique) > 1 else "")


def _dynamic(observations, explained: set[int], filename: str, label: str) -> list[Finding]:
    from dpcheck.registry import rules_by_code

    rules = rules_by_code()
    out, seen = [], set()
    # A scattered argument (DP803-DP806) is the root cause of the output differences it brings.
    root_causes = {o.get("dynamic") for i, (o, _) in enumerate(observations) if i not in explained} & {
        "DP803", "DP804", "DP805", "DP806"}
    if root_causes:
        explained = explained | {i for i, (o, _) in enumerate(observations) if o.get("dynamic") in ("DP801", "DP802")}
    for index, (obs, model) in enumerate(observations):
        code = obs.get("dynamic")
        if index in explained or not code or code not in rules:
            continue
        if code in seen:
            continue  # one finding per dynamic rule and file: the first batch's evidence
        seen.add(code)
        row = obs.get("line") or 1
        out.append(Finding(code, f"{rules[code].summary}: {obs['evidence']}", rules[code].severity.value,
                           filename, row, 1, row, 1, _line(filename, row), None, row, (),
                           _status("confirmed", label, f"{obs['evidence']} (model: {model['label']}, "
                                   f"inputs: {model['inputs']})")))
    return out


def _line(filename: str, row: int) -> str:
    try:
        return Path(filename).read_text(encoding="utf-8", errors="replace").splitlines()[row - 1]
    except (OSError, IndexError):
        return ""
