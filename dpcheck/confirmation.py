"""The ``--confirm`` half of the findings contract: what the harness saw (:class:`Observation`,
sent by the child, matched to findings by the parent) and what it concluded about a finding
(:class:`Confirmation`, carried in :attr:`dpcheck.findings.Finding.confirmation`), each with
one ``to_dict`` and one ``from_dict`` like every type of :mod:`dpcheck.findings`.

They live apart from it so that a static run never creates their classes (it once cost about
2 ms a class, when they were dataclasses); the observation kinds, which the
rules declare, stay there as :class:`dpcheck.findings.ObservationKind`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from dpcheck.record import field, record


class ConfirmationStatus(str, enum.Enum):
    CONFIRMED = "confirmed"
    NOT_REPRODUCED = "not-reproduced"
    NOT_RUN = "not-run"


@record(frozen=True)
class Confirmation:
    """What ``--confirm`` concluded about one finding, and the run that supports it."""

    status: str
    backend: str
    evidence: str
    batch: int | None = None  # the batch size the evidence was observed at
    devices: int | None = None
    # The modes the file's models ran in ("training", then "eval" for the eval pass); empty when none ran.
    modes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        data: dict[str, Any] = {"status": self.status, "backend": self.backend, "evidence": self.evidence}
        if self.batch is not None:
            data["batch"] = self.batch
        if self.devices is not None:
            data["devices"] = self.devices
        if self.modes:
            data["modes"] = list(self.modes)
        return data

    @classmethod
    def from_dict(cls, data: Mapping | None) -> Confirmation | None:
        if data is None:
            return None
        batch, devices = data.get("batch"), data.get("devices")
        return cls(ConfirmationStatus(str(data["status"])).value, str(data["backend"]), str(data["evidence"]),
                   None if batch is None else int(batch), None if devices is None else int(devices),
                   tuple(str(m) for m in data.get("modes") or ()))


@record(frozen=True)
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
    def from_dict(cls, data: Mapping) -> Observation:
        def opt(key: str, kind=str):
            value = data.get(key)
            return None if value is None else kind(value)
        return cls(str(data["kind"]), str(data["evidence"]), opt("line", int), opt("attr"), opt("output_path"),
                   opt("argument"), opt("batch", int), opt("model"), opt("class_name"),
                   dict(data.get("details") or {}), opt("mode"))
