"""What a rule is. Each module in ``rules/`` defines one subclass of :class:`Rule`.

A rule carries its own documentation (the module docstring, rendered by
``dpcheck rule`` and into the README table) and its own examples: ``bad_example``
must be flagged by the rule and ``good_example`` must not (the tests check both).
"""

from __future__ import annotations

import ast
import sys
from typing import TYPE_CHECKING, ClassVar, Iterable

from dpcheck.findings import Applicability, Finding, Fix, RuleInfo, Severity, Subject
from dpcheck.record import field, record

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext
    from dpcheck.analysis.model_class import ModelClass
    from dpcheck.confirmation import Observation
    from dpcheck.fixes.cst import FixEditor

# `not_confirmable` of the rules that check training scripts: the harness runs models, not scripts.
TRAINING_SCRIPT = "training-script rules are not exercised by the harness"

REPO_URL = "https://github.com/dpcheck/dpcheck"
# Each rule's documentation is its module's docstring; the link points at that file.
DOCS_URL = REPO_URL + "/blob/main/rules/{module}.py"


@record
class Violation:
    """What a rule's check yields: a node, a message, optionally a severity and a fix."""

    node: ast.AST
    message: str
    severity: Severity | None = None
    fix: Fix | None = None
    # Each entry is a set of dotted class names of which at least one must turn out to be
    # an nn.Module in the project-wide index for the finding to stand (see dpcheck.index).
    requires: tuple[frozenset[str], ...] = field(default_factory=tuple)
    # Cross-file conditions, in the form of ``requires``, under which the finding is an error
    # whatever its severity (a path behind an option that every call through the wrapper passes).
    error_if: tuple[frozenset[str], ...] = field(default_factory=tuple)
    # Conditions under which the finding is advice only (``Finding.advice_if``, ClassIndex.advice):
    # a path behind an optional argument that no scanned caller passes (guards.optional_argument_guard).
    advice_if: tuple[str, ...] = field(default_factory=tuple)
    # What the finding is about, as data (the harness matches observations against it).
    subject: Subject = field(default_factory=Subject)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    summary: ClassVar[str]  # one line
    fix_hint: ClassVar[str]  # one line, printed as `help:` under each finding
    bad_example: ClassVar[str] = ""
    good_example: ClassVar[str] = ""
    default_enabled: ClassVar[bool] = True
    # "static" rules check source; "dynamic" ones are only reported by the harness.
    kind: ClassVar[str] = "static"
    # True when ``check_class`` reports only about code that runs in forward (``ModelClass.reachable``:
    # forward, the methods it reaches, the hooks the class registers), so it finds nothing in a
    # class without such code: the analysis does not ask it about one (a third of a model
    # library's classes: configs, outputs, pretrained-model bases).
    forward_code_only: ClassVar[bool] = False
    # The DataParallel method (scripts.WRAPPER_METHODS) whose stock behaviour the rule's class findings
    # are about: "gather" for what becomes of forward's output, "scatter" for how its arguments are
    # split. Where every scanned wrap of the class is by a subclass defining its own, they are advice.
    wrapper_method: ClassVar[str] = ""

    # --confirm. A static rule names the observation kinds (dpcheck.findings.ObservationKind)
    # that confirm its findings once the finding's line ran under DataParallel; `matches`
    # decides for one finding and one observation.
    confirms: ClassVar[frozenset[str]] = frozenset()
    # Why --confirm cannot tell anything about this rule's findings ("" when it can).
    not_confirmable: ClassVar[str] = ""
    # A dynamic rule names the observation kinds it reports when no static finding explains
    # them (`reports_observation` decides for one observation) ...
    reports: ClassVar[frozenset[str]] = frozenset()
    # ... and the dynamic codes whose observations are consequences of its own, so they are
    # not reported next to it (a badly scattered argument explains the outputs that differ).
    supersedes: ClassVar[frozenset[str]] = frozenset()

    def matches(self, finding: Finding, observation: Observation, ran: bool) -> bool:
        """Is ``observation`` evidence for ``finding``? ``ran``: the finding's line ran under
        DataParallel. Default: the observation happened at the finding's lines, or it is of a
        kind this rule confirms, the line ran, and it is about the finding's subject."""
        if observation.line is not None and finding.row <= observation.line <= finding.end_row:
            return True
        return ran and observation.kind in self.confirms and self.matches_subject(finding, observation)

    def matches_subject(self, finding: Finding, observation: Observation) -> bool:
        """An observation about an attribute is evidence only for a finding about that attribute,
        and one about a class's state only for findings in that class (or a base of it)."""
        if observation.attr is not None and observation.attr != finding.subject.attr:
            return False
        if None not in (observation.argument, finding.subject.argument) \
                and observation.argument != finding.subject.argument:
            return False  # about another forward argument
        wanted = finding.subject.class_name
        if observation.class_name is None or wanted is None:
            return True
        return wanted.rsplit(".", 1)[-1] in observation.details.get("classes", [observation.class_name])

    def reports_observation(self, observation: Observation) -> bool:
        """Dynamic rules: does this rule report ``observation`` (when nothing static explains it)?"""
        return observation.kind in self.reports

    def check_class(self, model: "ModelClass") -> Iterable[Violation]:
        """Findings in one nn.Module subclass (forward-reachable code and its facts)."""
        return ()

    def check_file(self, ctx: "FileContext") -> Iterable[Violation]:
        """Findings that are about the file as a whole (training scripts)."""
        return ()

    def fix(self, finding: Finding, editor: "FixEditor") -> None:
        """Rewrite the flagged code with libcst, for a finding whose violation offered a
        fix (see :meth:`offer_fix`). ``editor.node`` is the CST node at the finding's span;
        make the change through ``editor``. Making no change withdraws the fix. Runs only
        for files with a fix to apply, so it may cost what a CST costs."""

    @staticmethod
    def offer_fix(message: str, applicability: Applicability = Applicability.UNSAFE, **data: str) -> Fix:
        """A fix this finding can have: the edits are made by :meth:`fix` when needed;
        ``data`` carries what the static check knows that the fixer needs."""
        return Fix(message, (), applicability.value, tuple(sorted(data.items())))

    # Helpers shared by every rule.
    def violation(self, node: ast.AST, message: str, **kwargs) -> Violation:
        return Violation(node, message, **kwargs)

    @classmethod
    def explanation(cls) -> str:
        """The full documentation: the defining module's docstring."""
        doc = sys.modules[cls.__module__].__doc__ or ""
        return _dedent(doc)

    @classmethod
    def url(cls) -> str:
        return DOCS_URL.format(module=cls.__module__.rsplit(".", 1)[-1])

    @classmethod
    def info(cls) -> RuleInfo:
        """The metadata reporters show for this rule's findings."""
        return RuleInfo(cls.code, cls.name, cls.severity.value, cls.summary, cls.fix_hint, cls.url(),
                        cls.explanation(), cls.markdown())

    @classmethod
    def markdown(cls) -> str:
        """The rule's page: summary, explanation, and its two examples."""
        parts = [f"# {cls.code} {cls.name}", "",
                 f"Default severity: **{cls.severity.value}**"
                 + ("" if cls.default_enabled else " (off by default; enable with `--extend-select`)"),
                 "", cls.summary, "", cls.explanation()]
        if cls.bad_example:
            parts += ["", "## Example", "", "```python", _dedent(cls.bad_example), "```"]
        if cls.good_example:
            parts += ["", "## Use instead", "", "```python",
                      _dedent(cls.good_example), "```"]
        parts += ["", f"Fix: {cls.fix_hint}"]
        return "\n".join(parts)


def _dedent(text: str) -> str:
    # textwrap is imported here, not with the module: only a run that reports a finding
    # (or prints a rule's page) needs the docs, and a clean file's run should not pay for it.
    import textwrap

    return textwrap.dedent(text).strip()
