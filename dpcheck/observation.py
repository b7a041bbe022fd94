"""What the ``--confirm`` harness saw: the one type of the findings contract that only
``--confirm`` uses (the child sends observations, the parent matches them to findings).

It lives apart from :mod:`dpcheck.findings` so that a static run never creates its class
(a frozen dataclass costs about 2 ms to create on Python 3.11, on every run); its kinds,
which the rules declare, stay there as :class:`dpcheck.findings.ObservationKind`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Observation:
    """One thing the harness saw differ between the single-device and DataParallel runs.

    ``kind`` names the mechanism (see :class:`dpcheck.findings.ObservationKind`); the other fields say
    where and about what, as data, so that rules match observations to their findings
    without reading the evidence text.
    """

    kind: str
    evidence: str
    line: int | None = None  # a line of the model file, when the observation has one
    attr: str | None = None  # state observations: the attribute's own name (details["path"]: its full path)
    output_path: str | None = None
    argument: str | None = None
    batch: int | None = None
    model: str | None = None  # the example's label (a class name or dpcheck_example)
    class_name: str | None = None  # the class whose code the observation is about, when known
    details: Mapping[str, Any] = field(default_factory=dict)
    # The mode ("training" or "eval") of the run that saw it: the example's own mode, or the
    # eval pass that follows a training run (see dpcheck.harness.runner.run_model).
    mode: str | None = None

    @property
    def raised(self) -> bool:
        """The observation is an exception (its type is ``details["exception"]``)."""
        return bool(self.details.get("exception"))

    def to_dict(self) -> dict:
        data = {k: v for k, v in self.__dict__.items() if v is not None and k != "details"}
        if self.details:
            data["details"] = dict(self.details)
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> "Observation":
        def opt(key: str, kind=str):
            value = data.get(key)
            return None if value is None else kind(value)
        return cls(str(data["kind"]), str(data["evidence"]), opt("line", int), opt("attr"), opt("output_path"),
                   opt("argument"), opt("batch", int), opt("model"), opt("class_name"),
                   dict(data.get("details") or {}), opt("mode"))
