"""Find every rule in ``dpcheck.rules`` and resolve selections like ruff does."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
from collections.abc import Iterator, Mapping
from functools import lru_cache

from dpcheck.findings import RuleInfo
from dpcheck.rule import Rule


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    import dpcheck.rules as package

    found: list[type[Rule]] = []
    for name in _module_names(package.__path__):
        if name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule \
                    and value.__module__ == module.__name__:
                found.append(value)
    codes = [r.code for r in found]
    duplicates = {c for c in codes if codes.count(c) > 1}
    if duplicates:
        raise RuntimeError(f"rule codes defined twice: {sorted(duplicates)}")
    return tuple(sorted(found, key=lambda r: r.code))


def _module_names(folders) -> Iterator[str]:
    """The modules of a package's folders, as ``pkgutil.iter_modules`` names them for a
    folder of source files (``pkgutil`` itself imports ``inspect``: 7 ms of every run)."""
    seen: set[str] = set()
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in names:
            name, dot, suffix = entry.partition(".")
            if dot and "." + suffix in importlib.machinery.all_suffixes() and name.isidentifier() \
                    and name != "__init__" and name not in seen:
                seen.add(name)
                yield name


def rules_by_code() -> dict[str, type[Rule]]:
    return {r.code: r for r in all_rules()}


def rule_infos() -> Mapping[str, RuleInfo]:
    """Every rule's metadata by code, as reporters receive it."""
    return _RuleInfos(rules_by_code())


class _RuleInfos(Mapping):
    """Code -> RuleInfo, each made when first read: a rule's docs (its dedented module docstring
    and examples) cost a few milliseconds for all rules, and a run reads only its findings' codes."""

    def __init__(self, rules: dict[str, type[Rule]]) -> None:
        self._rules = rules
        self._made: dict[str, RuleInfo] = {}

    def __getitem__(self, code: str) -> RuleInfo:
        info = self._made.get(code)
        if info is None:
            info = self._made[code] = self._rules[code].info()
        return info

    def __iter__(self):
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)


class SelectionError(ValueError):
    pass


def matches(selector: str, code: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def check_selector(selector: str, where: str) -> str:
    """A selector must name at least one rule (ruff errors on unknown codes too)."""
    selector = selector.strip().upper()
    if selector != "ALL" and not any(matches(selector, r.code) for r in all_rules()):
        raise SelectionError(f"Unknown rule selector `{selector}` in {where}")
    return selector


def select_rules(select: list[str] | None, extend_select: list[str], ignore: list[str],
                 include_dynamic: bool = False) -> list[type[Rule]]:
    """Default: every rule that is on by default; `select` replaces that set.

    As in ruff, the more specific selector wins between select and ignore, so
    `--select DP1nn --ignore DP1` keeps DP1nn and `--select DP1 --ignore DP1nn` drops it.
    """
    chosen = []
    for rule in all_rules():
        if rule.kind == "dynamic" and not include_dynamic:
            continue
        best_on = -1
        if select is None:
            if rule.default_enabled:
                best_on = 0
        else:
            best_on = max((_specificity(s) for s in select if matches(s, rule.code)), default=-1)
        best_on = max([best_on] + [_specificity(s) for s in extend_select if matches(s, rule.code)])
        best_off = max((_specificity(s) for s in ignore if matches(s, rule.code)), default=-1)
        if best_on >= 0 and best_on > best_off:
            chosen.append(rule)
    return chosen


def _specificity(selector: str) -> int:
    return 0 if selector == "ALL" else len(selector)
