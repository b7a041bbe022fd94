"""The project-wide class index: which classes in the scanned tree are nn.Modules.

Built from the class summaries each file's analysis returns (no second parse), then
used to settle findings whose class's module-ness depended on a base in another file.
"""

from __future__ import annotations

from typing import Iterable

from dpcheck.analysis.file import FileResult
from dpcheck.analysis.torch_api import MODULE_BASES, is_torch_nn_class
from dpcheck.findings import Finding


class ClassIndex:
    def __init__(self, results: Iterable[FileResult], load_module=None) -> None:
        """``load_module(dotted) -> FileResult | None`` summarises a module that was not
        scanned (pre-commit passes only changed files; their bases live elsewhere)."""
        self.load_module = load_module
        self._loaded: set[str] = set()
        self.bases: dict[str, tuple[str, ...]] = {}
        self.aliases: dict[str, str] = {}  # "pkg.models.Block" -> "pkg.models.block.Block"
        by_tail: dict[str, list[str]] = {}
        self._by_tail = by_tail
        self._memo: dict[str, bool] = {}
        for result in results:
            self._add(result)

    def _add(self, result: FileResult) -> None:
        self._loaded.add(result.module)
        for cls in result.classes:
            self.bases.setdefault(cls.qualname, cls.bases)
            tail = ".".join(cls.qualname.rsplit(".", 2)[-2:])
            self._by_tail.setdefault(tail, []).append(cls.qualname)
        for name, target in result.aliases.items():
            self.aliases[f"{result.module}.{name}"] = target

    def _load_for(self, name: str) -> bool:
        """Summarise the module that should define ``name``; True if anything new was added."""
        if self.load_module is None:
            return False
        module = name.rpartition(".")[0]
        for candidate in (module, name):
            if candidate and candidate not in self._loaded:
                self._loaded.add(candidate)
                result = self.load_module(candidate)
                if result is not None:
                    self._add(result)
                    self._memo.clear()
                    return True
        return False

    def lookup(self, name: str) -> str | None:
        """The indexed class a dotted name refers to, following re-exports."""
        for _ in range(8):
            if name not in self.bases and name not in self.aliases:
                self._load_for(name)
            if name in self.bases:
                return name
            if name in self.aliases:
                name = self.aliases[name]
                continue
            break
        # Scanned from a different root than the imports assume: match `module.Class` uniquely.
        tail = ".".join(name.rsplit(".", 2)[-2:])
        candidates = self._by_tail.get(tail, [])
        return candidates[0] if len(candidates) == 1 else None

    def is_module(self, name: str, trail: frozenset[str] = frozenset()) -> bool:
        if name in MODULE_BASES or is_torch_nn_class(name):
            return True
        if name in self._memo:
            return self._memo[name]
        target = self.lookup(name)
        if target is None or target in trail:
            return False
        if target in MODULE_BASES:
            return True
        answer = any(self.is_module(base, trail | {target}) for base in self.bases[target])
        self._memo[name] = answer
        return answer

    def holds(self, finding: Finding) -> bool:
        return all(any(self.is_module(name) for name in names) for names in finding.requires)
