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
import re
from pathlib import Path
from typing import Callable, Sequence

from dpcheck.confirmation import Confirmation, Observation
from dpcheck.constants import CONFIRM_NOT_RUN
from dpcheck.findings import ARGUMENT_KINDS, SYMPTOM_KINDS, Finding
from dpcheck.harness.processes import Launcher
from dpcheck.record import replace


def confirm_findings(findings: list[Finding], files: Sequence[Path], settings, options,
                     settings_for: Callable[[Path], object] | None = None) -> list[Finding]:
    """Run each file's models and mark its findings. ``settings`` holds the run-wide choices
    (backend, devices: one machine runs them all); ``settings_for(path)``, where given, is a
    file's own settings, whose ``examples`` and ``timeout`` apply to that file, as every
    other setting does (its closest configuration, then the command line)."""
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
    workers = max(1, min(workers, len(files)))
    with Launcher(settings.backend, settings.devices, settings.timeout, settings.examples, workers) as launcher, \
            ThreadPoolExecutor(max_workers=workers) as pool:
        def run(path: Path) -> dict:
            own = settings_for(path) if settings_for else settings
            return launcher.run(Path(path), own.examples, own.timeout)

        results = list(pool.map(run, files))
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
        reason = result.get("error") or "no model in this file to run (its nn.Module subclasses, if any, are DataParallel wrappers)"
        return [replace(f, confirmation=_status("not-run", backend, reason)) for f in static]
    ran = [m for m in result["models"] if "report" in m]
    if not ran:
        reasons = "; ".join(f"{m['label']}: {m.get('not_run')}" for m in result["models"])
        return [replace(f, confirmation=_status("not-run", backend, reasons)) for f in static]

    compared = [m for m in ran if not all(e.startswith("building the model") for e in m["report"]["errors"])
                or not m["report"]["errors"]]
    if not compared:
        reasons = "; ".join(dict.fromkeys(e for m in ran for e in m["report"]["errors"]))
        return [replace(f, confirmation=_status("not-run", label, reasons)) for f in static]
    runs = [_ModelRun(m, result) for m in ran]
    observations = [(Observation.from_dict(o), run) for run in runs for o in run.model["report"]["observations"]]
    failures = [(Observation.from_dict(o), run) for run in runs
                for o in run.model["report"]["reference_failures"]]
    attribution = _Attribution(rules, static, observations, failures)
    marked: list[Finding] = []
    for index, finding in enumerate(static):
        rule = rules.get(finding.code)
        mine = [run for run in runs if run.uses(finding)]
        under_dp = any(run.took_part(finding) for run in mine)
        in_reference = any(_statement_ran(finding, run.in_reference) for run in mine)
        stopped = next((attribution.stop(run) for run in mine if attribution.stop(run)), None)
        evidence = attribution.evidence(index)
        skipped = "".join(f"; {m['label']} was not run: {m['not_run']}" for m in result["models"] if "not_run" in m)
        if rule is not None and rule.not_confirmable:
            status = _status("not-run", label, rule.not_confirmable)
        elif evidence:
            status = _status("confirmed", label, evidence)
        elif not mine:
            status = _status("not-run", label, f"it is in class `{finding.subject.class_name}`, which no model "
                             f"that ran uses ({', '.join(run.model['label'] for run in runs)}){skipped}")
        elif in_reference and not under_dp and stopped:
            status = _status("not-run", label, f"the DataParallel run stopped at {stopped} before this line ran")
        elif not under_dp:
            where = "ran on one device but not under DataParallel" if in_reference else "did not run"
            status = _status("not-run", label, f"line {finding.row} {where} in the example "
                             f"({', '.join(run.model['inputs'] for run in mine)}; {_modes(mine)}){skipped}")
        elif index in attribution.lost:
            obs, winner = attribution.lost[index]
            status = _status("not-reproduced", label, f"the line ran under DataParallel; the difference seen "
                             f"({obs.evidence}) is explained by {winner.code} at line {winner.row}")
        else:
            status = _status("not-reproduced", label, "the line ran under DataParallel and the run matched "
                             f"the single-device run (batches {mine[0].model['report']['batches']}, {_modes(mine)})"
                             f"{_notes(mine)}")
        marked.append(replace(finding, confirmation=status))
    marked.extend(_dynamic(rules, observations, attribution.claimed, filename, label))
    modes = tuple(dict.fromkeys(mode for run in runs for mode in _run_modes(run)))
    return [replace(f, confirmation=replace(f.confirmation, modes=modes)) if f.confirmation else f for f in marked]


class _ModelRun:
    """One example's model as the child ran it: which lines ran (under DataParallel, on one
    device) and which classes its modules have (per model when the child says, else the file's)."""

    def __init__(self, model: dict, result: dict):
        self.model = model
        executed = model.get("executed_lines", result.get("executed_lines", []))
        self.executed = set(executed)
        self.under_dp = set(model.get("dataparallel_lines", result.get("dataparallel_lines", executed)))
        self.in_reference = set(model.get("reference_lines", result.get("reference_lines", ())))
        self.classes = set(model["report"].get("classes") or ())
        self.scattered_to = set(model["report"].get("scattered_to") or ())

    def ran(self, finding: Finding, obs: Observation) -> bool:
        """Did the finding's code take part in the DataParallel run that showed ``obs``? Its line ran
        under DataParallel, or it is construction code (it ran, but in neither step); for a
        scattered argument, its forward is the one that received it."""
        if obs.kind in ARGUMENT_KINDS and self.scattered_to:
            wanted = finding.subject.class_name
            if wanted is not None and wanted.rsplit(".", 1)[-1] in self.scattered_to:
                return True
        return self.took_part(finding)

    def took_part(self, finding: Finding) -> bool:
        """Its line ran under DataParallel, or it is construction code (it ran, in neither step)."""
        return _statement_ran(finding, self.under_dp) or (
            _statement_ran(finding, self.executed) and not _statement_ran(finding, self.in_reference))

    def uses(self, finding: Finding) -> bool:
        """Is the finding's class one of this model's (findings with no class: any model)?"""
        wanted = finding.subject.class_name
        return not self.classes or wanted is None or wanted.rsplit(".", 1)[-1] in self.classes


class _Attribution:
    """Which finding each observation is evidence for.

    An observation is evidence only for findings of the model that produced it, in the classes
    that model uses, whose rule accepts it (``Rule.matches``, with "the line ran" meaning: under
    DataParallel in that model's run). When some of those findings name the observation's
    subject (the attribute or argument), only they take it. A symptom (``SYMPTOM_KINDS``: values
    or gradients that differ, an exception at a line) is evidence for one finding only: the one at
    the line where it arose (the one whose argument or attribute the error names, if several are),
    else the one whose rule names that kind, preferring one whose own mechanism was not seen
    (findings of one rule at several statements count as one);
    a symptom with no line in a run where an argument was split the wrong way and no finding
    explains that split is the split's consequence, and no finding's.
    """

    def __init__(self, rules, static: list[Finding], observations, failures):
        self.rules, self.static = rules, static
        self.hits: dict[int, list[Observation]] = {}
        self.claimed: set[int] = set()  # indices of observations some static finding explains
        self.claimer: dict[int, int] = {}  # observation index -> finding index
        self.takers: dict[int, list[int]] = {}  # observation index -> every finding it is evidence for
        self.lost: dict[int, tuple[Observation, Finding]] = {}  # finding -> a symptom given to another
        self.observations = observations
        direct_in_run: dict[int, set[int]] = {}  # id(run) -> findings with direct evidence in it
        split_by: dict[int, set[int]] = {}  # id(run) -> findings that explain an argument split in it
        unexplained_split: set[int] = set()  # id(run) with a split argument no finding explains
        order = sorted(range(len(observations)), key=lambda i: observations[i][0].kind in SYMPTOM_KINDS)
        for index in order:
            obs, run = observations[index]
            candidates = self._candidates(obs, run, ran=lambda f, run=run, obs=obs: run.ran(f, obs))
            if obs.kind not in SYMPTOM_KINDS:
                for j in candidates:
                    self._give(index, j, obs)
                    direct_in_run.setdefault(id(run), set()).add(j)
                if obs.kind in ARGUMENT_KINDS:
                    split_by.setdefault(id(run), set()).update(candidates)
                    if not candidates:
                        unexplained_split.add(id(run))
                continue
            cause = self._cause(index, obs, run)
            if cause is not None and cause in self.takers:
                # The harness saw the mechanism behind this symptom (a device mismatch from a tensor
                # another replica stored in a shared container): its findings take the symptom too.
                for j in self.takers[cause]:
                    self._give(index, j, obs)
                continue
            if obs.line is None and id(run) in unexplained_split:
                continue  # the split's consequence: its dynamic finding explains it
            if obs.line is None and split_by.get(id(run)):
                # The split's consequence, for the findings that explain the split (their forward
                # received it, whether or not their line was reached).
                by_split = [j for j in sorted(split_by[id(run)]) if self._accepts(static[j], obs, True)]
                candidates = by_split or candidates
            if not candidates:
                continue
            direct = direct_in_run.get(id(run), set())
            best = max(self._rank(j, obs, direct) for j in candidates)
            top = [j for j in candidates if self._rank(j, obs, direct) == best]
            if not _at_line(static[top[0]], obs):
                # No line to tell them apart: one rule's findings (the same claim, made at several
                # statements) take it, not every rule that lists the kind.
                top = [j for j in top if static[j].code == static[top[0]].code]
            for j in top:
                self._give(index, j, obs)
            for j in candidates:
                if j not in top:
                    self.lost.setdefault(j, (obs, static[top[0]]))
        for obs, run in failures:  # single-device failures: evidence at their line, never dynamic findings
            for j in self._candidates(obs, run, ran=lambda f, run=run: _statement_ran(f, run.executed)):
                self.hits.setdefault(j, []).append(obs)

    def _accepts(self, finding: Finding, obs: Observation, ran: bool) -> bool:
        rule = self.rules.get(finding.code)
        return _at_line(finding, obs) if rule is None else rule.matches(finding, obs, ran)

    def _candidates(self, obs: Observation, run: _ModelRun, ran) -> list[int]:
        found = [j for j, f in enumerate(self.static) if run.uses(f) and self._accepts(f, obs, ran(f))]
        named = [j for j in found if _names_subject(self.static[j], obs)]
        return named or found

    def _rank(self, j: int, obs: Observation, direct: set[int]) -> tuple:
        finding = self.static[j]
        rule = self.rules.get(finding.code)
        named = obs.raised and any(re.search(rf"\b{re.escape(name)}\b", obs.evidence)
                                   for name in (finding.subject.argument, finding.subject.attr) if name)
        listed = rule is not None and obs.kind in rule.confirms
        # A finding whose own mechanism was seen needs no symptom; one that only symptoms can
        # show is the likelier explanation.
        return (_at_line(finding, obs), named, listed, j not in direct)

    def _give(self, index: int, j: int, obs: Observation) -> None:
        self.hits.setdefault(j, []).append(obs)
        self.claimed.add(index)
        self.claimer.setdefault(index, j)
        self.takers.setdefault(index, []).append(j)

    def _cause(self, index: int, obs: Observation, run: _ModelRun) -> int | None:
        """The index of the observation the harness named as this symptom's cause (details "cause":
        its kind and path, in the same run and batch), or None."""
        cause = obs.details.get("cause")
        if not isinstance(cause, dict):
            return None
        for other, (candidate, other_run) in enumerate(self.observations):
            if other != index and other_run is run and candidate.batch == obs.batch \
                    and candidate.kind == cause.get("kind") and candidate.details.get("path") == cause.get("path"):
                return other
        return None

    def evidence(self, j: int) -> str | None:
        """The finding's evidence in words: its own mechanism first, then the symptoms it explains."""
        hits = sorted(self.hits.get(j, []), key=lambda o: o.kind in SYMPTOM_KINDS)
        unique = list(dict.fromkeys(o.evidence for o in hits))
        if not unique:
            return None
        return unique[0] + (f" (and {len(unique) - 1} more)" if len(unique) > 1 else "")

    def stop(self, run: _ModelRun) -> str | None:
        """Where this model's DataParallel run stopped, in words ("line 12 (<code>)"), when an
        exception stopped it at a line of the model file; the code is the finding that explains it."""
        for index, (obs, other) in enumerate(self.observations):
            if other is run and obs.raised and obs.line is not None:
                j = self.claimer.get(index)
                code = self.static[j].code if j is not None else next(
                    (r.code for r in self.rules.values() if r.kind == "dynamic" and r.reports_observation(obs)), None)
                return f"line {obs.line}" + (f" ({code})" if code else "")
        return None


def _run_modes(run) -> list[str]:
    """The modes one model ran in: its example's, then eval when the eval pass followed training."""
    report = run.model["report"]
    return list(report.get("modes") or [report.get("mode") or "eval"])


def _modes(runs) -> str:
    """The mode(s) the models ran in, in words ("training mode", "training and eval mode")."""
    modes = list(dict.fromkeys(mode for run in runs for mode in _run_modes(run)))
    return " and ".join(modes) + " mode"


def _notes(runs) -> str:
    """What the runs could not do that leaves their verdicts standing (an eval pass that failed)."""
    notes = list(dict.fromkeys(note for run in runs for note in run.model["report"].get("notes") or ()))
    return "".join(f"; {note}" for note in notes)


def _names_subject(finding: Finding, obs: Observation) -> bool:
    """The observation is about the very attribute or argument the finding names."""
    subject = finding.subject
    return (obs.attr is not None and obs.attr == subject.attr) or (
        obs.argument is not None and obs.argument == subject.argument)


def _statement_ran(finding: Finding, executed: set[int]) -> bool:
    return any(finding.row <= line <= finding.end_row for line in executed)


def _at_line(finding: Finding, observation: Observation) -> bool:
    return observation.line is not None and finding.row <= observation.line <= finding.end_row


def _dynamic(rules, observations, explained: set[int], filename: str, label: str) -> list[Finding]:
    """Findings of the dynamic rules for the observations no static finding explained."""
    dynamic = [rule for rule in rules.values() if rule.kind == "dynamic"]
    reporter = {index: next((r for r in dynamic if r.reports_observation(obs)), None)
                for index, (obs, _run) in enumerate(observations) if index not in explained}
    # A root cause (an argument split the wrong way) explains the differences it brings in its
    # own model's run.
    superseded = {(id(observations[i][1]), code) for i, r in reporter.items() if r is not None
                  for code in r.supersedes}
    out, seen = [], set()
    for index, rule in reporter.items():
        obs, run = observations[index]
        if rule is None or (id(run), rule.code) in superseded:
            continue
        model = run.model
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
