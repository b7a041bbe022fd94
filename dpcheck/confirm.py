"""`--confirm`: run each checked file's model under the harness and mark the static findings.

Each file runs in its own child process (see `dpcheck.harness.processes`) with a time
limit, so a model that hangs, exits, crashes or leaks costs that file's result only.
Every static finding in the file gets `confirmation = {status, backend, evidence}`:

* `confirmed`: an observation of the run explains it: one at its line, or one of a kind its
  rule confirms about its subject (``Rule.confirms``/``Rule.matches``);
* `not-reproduced`: its line ran under DataParallel and nothing it predicts happened;
* `not-run`: the harness could not run it (no example, constructor failed, timeout) or
  its line never executed, with the reason.

Observations no static finding explains become the findings of the dynamic rule that
reports their kind (``Rule.reports``). This module knows no rule by code.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from dpcheck.constants import CONFIRM_NOT_RUN
from dpcheck.findings import Confirmation, Finding, Observation
from dpcheck.harness.processes import Launcher


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
    with Launcher(settings.backend, settings.devices, settings.timeout, settings.examples) as launcher, \
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda p: launcher.run(Path(p)), files))
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
    """Mark each static finding from the child's result, and add dynamic findings; a file whose
    model could not be compared gets a file-level finding saying why (never a clean result)."""
    from dpcheck.registry import all_rules

    rules = {cls.code: cls() for cls in all_rules()}
    marked = _mark(rules, static, result, filename)
    reason = not_compared(result)
    if reason is None or any(f.confirmation.status == "confirmed" for f in marked):
        return marked  # compared, or a single-device failure already confirmed a finding
    rule = rules[CONFIRM_NOT_RUN]
    backend, devices = result.get("backend", "none"), result.get("devices")
    label = backend + (f", {devices} devices" if devices else "")
    return marked + [Finding(CONFIRM_NOT_RUN, f"--confirm could not compare this file's model: {reason}",
                             rule.severity.value, filename, 1, 1, 1, 1, _line(filename, 1), None, 1,
                             confirmation=_status("not-run", label, reason))]


def not_compared(result: dict) -> str | None:
    """Why no model of the file was compared on one device and under DataParallel, or None
    when one was (or when the file has nothing to run)."""
    if result.get("error"):
        return result["error"]
    models = result.get("models") or []
    if not models:
        return None  # no nn.Module subclass and no example: nothing to confirm
    if any(m.get("report", {}).get("compared") for m in models):
        return None
    reasons = [f"{m['label']}: {m['not_run']}" for m in models if "not_run" in m]
    for m in models:
        report = m.get("report")
        if report is not None:
            why = [*report["errors"], *(o["evidence"] for o in report["reference_failures"])]
            reasons.append(f"{m['label']}: {'; '.join(dict.fromkeys(why)) or 'nothing was compared'}")
    return "; ".join(reasons)


def _mark(rules, static: list[Finding], result: dict, filename: str) -> list[Finding]:
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
    observations = [(Observation.from_dict(o), m) for m in ran for o in m["report"]["observations"]]
    failures = [Observation.from_dict(o) for m in ran for o in m["report"]["reference_failures"]]
    # Lines that ran during a DataParallel step and during a single-device step. A line that
    # ran in the single-device forward but never under DataParallel did not run because the
    # DataParallel run stopped first (lines of __init__ run in neither step).
    under_dp = set(result.get("dataparallel_lines", executed))
    in_reference = set(result.get("reference_lines", ()))
    explained: set[int] = set()
    claimed: dict[int, str] = {}  # observation index -> the code of the first finding it confirmed
    evidences = []
    for finding in static:
        rule = rules.get(finding.code)
        line_ran = finding.row in executed or _statement_ran(finding, executed)
        evidence, indices = _match(rule, finding, observations, failures, line_ran)
        explained |= indices
        for index in indices:
            claimed.setdefault(index, finding.code)
        evidences.append(evidence)
    stopped = _stop(rules, observations, claimed)
    marked: list[Finding] = []
    for finding, evidence in zip(static, evidences):
        rule = rules.get(finding.code)
        line_ran = finding.row in executed or _statement_ran(finding, executed)
        only_alone = _statement_ran(finding, in_reference) and not _statement_ran(finding, under_dp)
        if rule is not None and rule.not_confirmable:
            status = _status("not-run", label, rule.not_confirmable)
        elif evidence:
            status = _status("confirmed", label, evidence)
        elif only_alone and stopped:
            status = _status("not-run", label, f"the DataParallel run stopped at {stopped} before this line ran")
        elif not line_ran:
            skipped = "".join(f"; {m['label']} was not run: {m['not_run']}" for m in result["models"]
                              if "not_run" in m)
            status = _status("not-run", label, f"line {finding.row} did not run in the example "
                             f"({', '.join(m['inputs'] for m in ran)}){skipped}")
        else:
            status = _status("not-reproduced", label, "the line ran under DataParallel and the run matched "
                             f"the single-device run (batches {ran[0]['report']['batches']})")
        marked.append(replace(finding, confirmation=status))
    marked.extend(_dynamic(rules, observations, explained, filename, label))
    return marked


def _statement_ran(finding: Finding, executed: set[int]) -> bool:
    return any(finding.row <= line <= finding.end_row for line in executed)


def _at_line(finding: Finding, observation: Observation) -> bool:
    return observation.line is not None and finding.row <= observation.line <= finding.end_row


def _match(rule, finding: Finding, observations, failures, ran: bool) -> tuple[str | None, set[int]]:
    """Evidence for ``finding`` and the indices of the observations it explains: those its
    rule accepts (any at its lines when the code has no rule). Single-device failures are
    evidence too, but never dynamic findings."""
    def accepts(obs: Observation) -> bool:
        return rule.matches(finding, obs, ran) if rule is not None else _at_line(finding, obs)

    hits, indices = [], set()
    for index, (obs, _model) in enumerate(observations):
        if accepts(obs):
            hits.append(obs.evidence)
            indices.add(index)
    hits += [obs.evidence for obs in failures if accepts(obs)]
    if not hits:
        return None, indices
    unique = list(dict.fromkeys(hits))
    return unique[0] + (f" (and {len(unique) - 1} more)" if len(unique) > 1 else ""), indices


def _stop(rules, observations, claimed: dict[int, str]) -> str | None:
    """Where the DataParallel run stopped, in words ("line 12 (<code>)"), when an exception
    stopped it at a line of the model file; the code is the finding that explains it."""
    for index, (obs, _model) in enumerate(observations):
        if obs.raised and obs.line is not None:
            code = claimed.get(index) or next(
                (r.code for r in rules.values() if r.kind == "dynamic" and r.reports_observation(obs)), None)
            return f"line {obs.line}" + (f" ({code})" if code else "")
    return None


def _dynamic(rules, observations, explained: set[int], filename: str, label: str) -> list[Finding]:
    """Findings of the dynamic rules for the observations no static finding explained."""
    dynamic = [rule for rule in rules.values() if rule.kind == "dynamic"]
    reporter = {index: next((r for r in dynamic if r.reports_observation(obs)), None)
                for index, (obs, _model) in enumerate(observations) if index not in explained}
    # A root cause (an argument split the wrong way) explains the differences it brings.
    superseded = {code for r in reporter.values() if r is not None for code in r.supersedes}
    out, seen = [], set()
    for index, rule in reporter.items():
        if rule is None or rule.code in superseded:
            continue
        obs, model = observations[index]
        # Each occurrence once (the first batch's evidence): one per line of the model file
        # where it arose, and one per attribute, output or argument for those that have no
        # line. The same symptom seen at another batch size, or described by a neighbouring
        # kind (a 0-dim loss gathered into (2,) at one batch and (1,) at another), is the
        # same occurrence.
        occurrence = (rule.code, obs.model, obs.line, obs.attr, obs.output_path,
                      obs.argument or obs.details.get("argument"))
        if occurrence in seen:
            continue
        seen.add(occurrence)
        row = obs.line or 1
        out.append(Finding(rule.code, f"{rule.summary}: {obs.evidence}", rule.severity.value,
                           filename, row, 1, row, 1, _line(filename, row), None, row, (),
                           _status("confirmed", label, f"{obs.evidence} (model: {model['label']}, "
                                   f"inputs: {model['inputs']})")))
    return out


def _line(filename: str, row: int) -> str:
    try:
        return Path(filename).read_text(encoding="utf-8", errors="replace").splitlines()[row - 1]
    except (OSError, IndexError):
        return ""
