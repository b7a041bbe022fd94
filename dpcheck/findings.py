"""The findings contract: what the analysis produces and everything downstream reads.

One module holds every type that crosses a boundary (the cache, the reporters, the
``--confirm`` child protocol and the Python API), each with exactly one serialiser
(``to_dict``) and one deserialiser (``from_dict``). Reporters import only this module:
they receive a :class:`Report`, which carries the findings and the metadata of the rules
that produced them, so they never need the registry.

Deserialisers raise ``ValueError``/``KeyError``/``TypeError`` on malformed input; callers
that read data written elsewhere (the cache, a child process) treat that as "no result".
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from dpcheck.record import field, fields, record, replace

if TYPE_CHECKING:
    from dpcheck.confirmation import Confirmation


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def sarif_level(self) -> str:
        return {"error": "error", "warning": "warning", "info": "note"}[self.value]

    @property
    def rank(self) -> int:
        """Higher is more severe: ``finding.severity.rank >= fail_level.rank`` fails a run."""
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class Applicability(str, enum.Enum):
    """Ruff's words for how safe a fix is to apply without review."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


def _list(value) -> list:
    """A JSON array, or TypeError (a string is not a list of names)."""
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"expected a list, not {type(value).__name__}")
    return list(value)


def _location(row: int, column: int) -> dict:
    return {"row": row, "column": column}


@record(frozen=True)
class Edit:
    """Replace ``row:col``..``end_row:end_col`` (1-based rows, 0-based character columns)."""

    content: str
    row: int
    col: int
    end_row: int
    end_col: int

    def to_dict(self) -> dict:
        # Ruff's JSON: 1-based columns.
        return {"content": self.content, "location": _location(self.row, self.col + 1),
                "end_location": _location(self.end_row, self.end_col + 1)}

    @classmethod
    def from_dict(cls, data: Mapping) -> "Edit":
        return cls(str(data["content"]), int(data["location"]["row"]), int(data["location"]["column"]) - 1,
                   int(data["end_location"]["row"]), int(data["end_location"]["column"]) - 1)


@record(frozen=True)
class Fix:
    """A rewrite that resolves a finding: its edits, and whether applying it keeps behaviour."""

    message: str
    edits: tuple[Edit, ...]
    applicability: str = Applicability.UNSAFE.value
    # What the static check learned for the rule's own fixer (names, the input to follow):
    # (key, value) pairs, kept with cached findings, never shown in reports.
    data: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str | None = None) -> str | None:
        return dict(self.data).get(key, default)

    def to_dict(self) -> dict:
        """Ruff's JSON shape (plus ``data`` when the rule left some for its fixer)."""
        out = {"applicability": self.applicability, "message": self.message,
               "edits": [e.to_dict() for e in self.edits]}
        if self.data:
            out["data"] = dict(self.data)
        return out

    @classmethod
    def from_dict(cls, data: Mapping | None) -> "Fix | None":
        if data is None:
            return None
        return cls(str(data["message"]), tuple(Edit.from_dict(e) for e in data["edits"]),
                   Applicability(str(data["applicability"])).value,
                   tuple((str(k), str(v)) for k, v in dict(data.get("data") or {}).items()))


@record(frozen=True)
class Subject:
    """What a finding is about, as data: the harness matches observations against this,
    never against message text. Every field is optional; a rule fills what it knows."""

    attr: str | None = None  # `self.<attr>` the finding names
    output_path: str | None = None  # e.g. "output['loss']"
    argument: str | None = None  # a forward parameter name
    device: str | None = None  # the device expression's source text
    class_name: str | None = None  # the nn.Module class the finding is in

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping | None) -> "Subject":
        data = data or {}
        if not isinstance(data, Mapping):
            raise TypeError(f"a subject must be a mapping, not {type(data).__name__}")
        known = {k: (None if data.get(k) is None else str(data[k])) for k in _SUBJECT_FIELDS}
        return cls(**known)


_SUBJECT_FIELDS = tuple(f.name for f in fields(Subject))


@record(frozen=True)
class Finding:
    """One hazard at one place of one file (rows and columns 1-based), with its fix and confirmation."""

    code: str
    message: str
    severity: str
    filename: str
    row: int
    col: int  # 1-based characters, like ruff's JSON
    end_row: int
    end_col: int
    line_text: str  # the source line at `row`, for the `full` format
    fix: Fix | None = None
    noqa_row: int | None = None
    # All must hold (each: any of these classes is an nn.Module) for the finding to stand.
    requires: tuple[frozenset[str], ...] = ()
    confirmation: Confirmation | None = None
    # Silenced by `# noqa`: never reported, but --confirm still uses it to explain what the
    # run observed (so a known, suppressed hazard does not come back as a dynamic finding).
    suppressed: bool = False
    subject: Subject = field(default_factory=Subject)
    # The 1-based code cell of a notebook the rows and columns count in (ruff's `cell`);
    # None for a Python file. Fix edits of a notebook finding count in the same cell.
    cell: int | None = None
    # In the form of ``requires``: where they all hold, the finding is an error (settled with it).
    error_if: tuple[frozenset[str], ...] = ()
    # Conditions under which the finding is advice only, reported as info with the index's reason
    # (ClassIndex.advice: the class is wrapped only in subclasses with their own gather, or the
    # finding's path runs only behind an optional argument that no scanned caller passes).
    advice_if: tuple[str, ...] = ()

    def with_confirmation(self, confirmation: Confirmation) -> "Finding":
        return replace(self, confirmation=confirmation)

    def to_dict(self) -> dict:
        """Every field (the cache and the child protocol); reporters shape their own output."""
        return {
            "code": self.code, "message": self.message, "severity": self.severity, "filename": self.filename,
            "span": [self.row, self.col, self.end_row, self.end_col], "line_text": self.line_text,
            "fix": None if self.fix is None else self.fix.to_dict(), "noqa_row": self.noqa_row,
            "requires": [sorted(r) for r in self.requires],
            "confirmation": None if self.confirmation is None else self.confirmation.to_dict(),
            "suppressed": self.suppressed, "subject": self.subject.to_dict(), "cell": self.cell,
            # Rare: written only when present (the cache holds every finding).
            **({"error_if": [sorted(r) for r in self.error_if]} if self.error_if else {}),
            **({"advice_if": list(self.advice_if)} if self.advice_if else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "Finding":
        row, col, end_row, end_col = (int(v) for v in data["span"])
        noqa, cell = data["noqa_row"], data.get("cell")
        return cls(str(data["code"]), str(data["message"]), Severity(str(data["severity"])).value,
                   str(data["filename"]), row, col, end_row, end_col, str(data["line_text"]),
                   Fix.from_dict(data["fix"]), None if noqa is None else int(noqa),
                   tuple(frozenset(str(n) for n in _list(r)) for r in _list(data["requires"])),
                   _confirmation(data["confirmation"]), bool(data["suppressed"]),
                   Subject.from_dict(data.get("subject")), None if cell is None else int(cell),
                   tuple(frozenset(str(n) for n in _list(r)) for r in _list(data.get("error_if", []))),
                   tuple(str(n) for n in _list(data.get("advice_if", []))))


def _confirmation(data: Mapping | None) -> Confirmation | None:
    """A finding's confirmation read back; its type is imported only when there is one
    (after a --confirm run), so a static run never creates it."""
    if data is None:
        return None
    from dpcheck.confirmation import Confirmation

    return Confirmation.from_dict(data)


class ObservationKind(str, enum.Enum):
    """The mechanisms the harness watches for, rule-agnostic: what differed between the
    single-device run and the DataParallel run, never which rule explains it (rules declare
    that themselves, see :attr:`dpcheck.rule.Rule.confirms`). Each is the ``kind`` of a
    :class:`dpcheck.confirmation.Observation`, a type only ``--confirm`` creates."""

    # Module state after one forward (``attr`` names the attribute).
    STATE_LOST_ON_REPLICA = "state-lost-on-replica"  # a replica wrote it; the original never saw the write
    STATE_MUTATED_PER_REPLICA = "state-mutated-per-replica"  # a shared container changed once per replica
    STATE_DIFFERS = "state-differs"  # any other difference in an attribute or buffer
    SUBMODULES_NOT_KEPT = "submodules-not-kept"  # submodules added in forward did not reach the model
    # A tensor a replica stored in a container every replica shares (a list or dict attribute
    # of the original module) lives on one replica's device while the run raised a device
    # mismatch on another's (``attr``: the container; details "path", "classes", "device").
    SHARED_CONTAINER_TENSOR_ON_OTHER_DEVICE = "shared-container-tensor-on-other-device"
    # The gathered output (``output_path`` names the leaf).
    OUTPUT_STRUCTURE_DIFFERS = "output-structure-differs"
    SCALAR_OUTPUT_GATHERED = "scalar-output-gathered"  # a 0-dim tensor came back as one value per replica
    SCALAR_OUTPUT_SHAPE_DIFFERS = "scalar-output-shape-differs"  # a 0-dim tensor came back in another shape
    OUTPUT_SHAPE_DIFFERS = "output-shape-differs"  # a tensor of rank >= 1 came back in another shape
    OUTPUT_VALUE_DIFFERS = "output-value-differs"  # a non-tensor leaf differs
    VALUES_DIFFER = "values-differ"  # a floating-point tensor leaf differs beyond tolerance
    INTEGER_VALUES_DIFFER = "integer-values-differ"
    GRADS_DIFFER = "grads-differ"
    # A 0-dim loss gathered into one value per replica and averaged (`loss.mean()`, as trainers
    # do) weights uneven chunks equally: the gradients differ, and match once the per-replica
    # losses are weighted by their chunk sizes (``output_path`` names the loss).
    LOSS_MEAN_WEIGHTS_CHUNKS_EQUALLY = "loss-mean-weights-chunks-equally"
    # The DataParallel step raised (``line``: the model file's last line in the traceback).
    # details: "exception" (the exception's type name; every raised observation has it),
    # "first_batch_ran" (the first batch size, when it ran and this other batch size failed),
    # "mentions_packed_sequence" (True when the error is about a PackedSequence).
    DEVICE_MISMATCH = "device-mismatch"  # tensors on different devices met
    EXCEPTION_AT_LINE = "exception-at-line"
    GATHER_FAILED = "gather-failed"  # the outputs could not be gathered (no model line)
    KEYWORD_CHUNK_MISMATCH = "keyword-chunk-mismatch"  # keyword and positional arguments split differently
    # The scattered arguments (``argument`` names the argument).
    ARGUMENT_NOT_BATCH_SPLIT = "argument-not-batch-split"  # a tensor whose dim 0 is not the batch was split
    ARGUMENT_ZERO_DIM = "argument-zero-dim"  # a 0-dim tensor cannot be scattered
    ARGUMENT_LIST_SPLIT_PER_ELEMENT = "argument-list-split-per-element"  # a list of tensors: each one split
    ARGUMENT_PACKED_SEQUENCE_SPLIT = "argument-packed-sequence-split"  # its fields split independently
    ARGUMENT_NOT_SPLIT = "argument-not-split"  # a non-tensor passed whole to every replica
    # Cost.
    MEMORY_IMBALANCE = "memory-imbalance"
    # Expected behaviour, measured: in training mode each replica's BatchNorm normalises its own
    # chunk and only replica 0's running statistics are kept (``class_name``: the class owning
    # the layers; details "path": the layer whose chunk statistics differ most).
    BATCHNORM_STATS_PER_REPLICA = "batchnorm-statistics-per-replica"
    # The single-device reference run itself failed (kept apart from the observations: it is
    # evidence at its line, never a DataParallel difference).
    REFERENCE_FAILED = "reference-failed"


# Evidence for a finding that names it, never a finding of its own: the single-device run's
# failure, what DataParallel always does to BatchNorm in training mode, and the shared container
# behind a device mismatch (unexplained, the mismatch itself is reported, as a symptom).
EVIDENCE_ONLY_KINDS = frozenset({ObservationKind.REFERENCE_FAILED, ObservationKind.BATCHNORM_STATS_PER_REPLICA,
                                 ObservationKind.SHARED_CONTAINER_TENSOR_ON_OTHER_DEVICE})
# Symptoms downstream of a hazard's mechanism (what differs in the output or the gradients,
# where the run raised): each one is evidence for the one finding that explains it, never
# for every finding whose rule lists its kind.
SYMPTOM_KINDS = frozenset({
    ObservationKind.VALUES_DIFFER, ObservationKind.INTEGER_VALUES_DIFFER, ObservationKind.GRADS_DIFFER,
    ObservationKind.EXCEPTION_AT_LINE, ObservationKind.DEVICE_MISMATCH, ObservationKind.GATHER_FAILED,
    ObservationKind.OUTPUT_SHAPE_DIFFERS, ObservationKind.OUTPUT_STRUCTURE_DIFFERS,
    ObservationKind.OUTPUT_VALUE_DIFFERS, ObservationKind.SCALAR_OUTPUT_SHAPE_DIFFERS})
# Arguments DataParallel split the wrong way: a root cause that explains the symptoms of its
# model's run that happened at no finding's line.
ARGUMENT_KINDS = frozenset({
    ObservationKind.ARGUMENT_NOT_BATCH_SPLIT, ObservationKind.ARGUMENT_ZERO_DIM,
    ObservationKind.ARGUMENT_LIST_SPLIT_PER_ELEMENT, ObservationKind.ARGUMENT_PACKED_SEQUENCE_SPLIT,
    ObservationKind.ARGUMENT_NOT_SPLIT})


@record(frozen=True)
class RuleInfo:
    """What a reporter needs to know about a code: its name, one-line summary, help, docs."""

    code: str
    name: str
    severity: str
    summary: str
    help: str
    url: str
    explanation: str = ""
    markdown: str = ""


@record
class Report:
    """Everything a writer renders: the findings, the metadata of every code they use, and
    the settings that shape output (the SARIF root, which codes were selected)."""

    findings: Sequence[Finding]
    rules: Mapping[str, RuleInfo]
    root: Path = Path(".")
    selected: Sequence[str] = ()
    fail_level: Severity = Severity.WARNING
    # Files the run could not compare or check (path -> reason); reported, never "clean".
    file_messages: Mapping[str, str] = field(default_factory=dict)

    def rule(self, code: str) -> RuleInfo:
        info = self.rules.get(code)
        if info is None:
            return RuleInfo(code, code.lower(), "error", code, "", "")
        return info

    # --unsafe-fixes: unsafe fixes count as fixable (and are marked) like safe ones.
    unsafe_fixes: bool = False

    def fixable(self, finding: Finding) -> bool:
        """Would `--fix` (with this run's --unsafe-fixes) apply this finding's fix?"""
        fix = finding.fix
        return fix is not None and (fix.applicability == Applicability.SAFE.value or (
            self.unsafe_fixes and fix.applicability == Applicability.UNSAFE.value))

    @property
    def fix_counts(self) -> tuple[int, int]:
        """(fixable now, hidden unsafe fixes that --unsafe-fixes would enable)."""
        now = sum(1 for f in self.findings if self.fixable(f))
        hidden = sum(1 for f in self.findings if f.fix is not None and not self.fixable(f)
                     and f.fix.applicability == Applicability.UNSAFE.value)
        return now, hidden
