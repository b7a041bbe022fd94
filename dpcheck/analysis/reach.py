"""Which scanned files a file that wraps a model can run, by imports, file by file.

A monorepo holds many `train.py`, `model.py` and `common.py` files, one per subproject, which
share one dotted module name (a folder without `__init__.py` is no package). Python does not
confuse them: a script's imports resolve first in its own folder (`sys.path[0]`), and a
package module's from the folder above its top package. So do these: an import that names a
scanned file from there is that file alone; one that names none (a launcher set `sys.path`, the
scan's root differs from the script's) is the scanned files whose paths end with it, or else every
module of that name (``resolve_elsewhere``), which is generous: a file wrongly taken for imported
keeps findings.

Reach of a wrapping file W: the files that import W, and their importers, up to the scripts
(its *runners*), then everything they import, transitively. Through a package `__init__.py`
that takes only some names from W (`from .trainer import Trainer`), an importer of the package
runs W only if it takes one of those names (`from transformers import BertModel` does not run
a vendored `Trainer`). A wrapping file whose runners are all such package files, none of which
any file takes the name from, never runs: it is *dead* (a vendored library's `Trainer` that no
script builds). An import of a package's submodule (`from transformers.optimization import AdamW`)
runs the package's `__init__.py` but takes none of its names; and a wrap of what its callers hand it,
inside a package the project's scripts use as a library, runs only through the classes of that
package that the project builds (see ``ImportGraph.runners``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

_SEP = os.sep
_INIT = os.sep + "__init__.py"

# What ``ImportGraph.runners`` answers where an opaque module runs the wrapping file.
OPAQUE_RUNNER: set[str] = {"<opaque>"}

# How many trailing parts of a path the suffix index keeps (deeper imports are rare).
_SUFFIX_DEPTH = 6

# The end of an import name that stands for every module of a package (mentions._loads_by_name: a
# registry's `import_module(f"models.{name}")` may load any module under `models/`, and no other).
SUBMODULES = ".*"

# What an importer takes from a file it imports: these names, or everything (``EVERYTHING``: a
# plain `import a.b`, a star import, a from-import of a submodule).
EVERYTHING = None


def _packages_above(attr: str) -> set[str] | None:
    """What an import takes from the packages above the module it names: `from a.b import c` runs
    `a/__init__.py` but binds none of its names (nothing it re-exports, a vendored library's
    `Trainer`, is used through it); `import a.b` binds `a`, through which anything may be."""
    return set() if attr else EVERYTHING


def _take(found: dict[str, set[str] | None], filename: str, taken: set[str] | None) -> None:
    """Add what an import takes from a file to what it was found to take already."""
    known = found.get(filename, set())
    found[filename] = EVERYTHING if known is EVERYTHING or taken is EVERYTHING else known | taken


class ImportGraph:
    def __init__(self, files: dict[str, tuple[str, list[str]]], opaque: set[str],
                 resolve_elsewhere: Callable[[str], set[str]], training: frozenset[str] = frozenset(),
                 classes: Mapping[str, set[str]] | None = None) -> None:
        """``files``: filename -> (dotted module, FileResult.imports); ``opaque``: the files that
        may load any module (by a computed name, or not scanned: what they import is not all
        known); ``resolve_elsewhere(name)``: the files of the indexed modules an import name may
        stand for, by name alone; ``training``: the files that run a training loop (see
        ``_vendored_elsewhere``); ``classes``: filename -> the simple names of the classes it
        defines (see ``runners``' ``handed``)."""
        self._files = files
        self._classes = classes or {}
        self._opaque = opaque
        self._resolve_elsewhere = resolve_elsewhere
        self._training = training
        self._vendored: dict[tuple[str, str], bool] = {}
        # file -> {file it imports -> what it takes from it}; files whose imports are not all known.
        self._takes: dict[str, dict[str, set[str] | None]] = {}
        self._answers: dict[tuple[tuple[str, ...], str], tuple[dict[str, set[str] | None], bool]] = {}
        self._packages = {f for f in files if f.endswith(_INIT)}  # (their `__init__.py` files)
        self._incomplete: set[str] = set()
        # The files by the last parts of their paths (`utils/misc.py` under `('utils', 'misc')`, a
        # package's `__init__.py` under its folder's): where an import does not resolve from the
        # importer's roots, some other root on `sys.path` holds it (a launcher's `sys.path.insert`).
        self._by_suffix: dict[tuple[str, ...], list[str]] = {}
        # The folders above scanned files, up to _SUFFIX_DEPTH levels (a folder without
        # `__init__.py` included), by each run of their last parts.
        self._folders: dict[tuple[str, ...], set[str]] = {}
        ancestors = {os.path.dirname(filename) for filename in files}
        for _ in range(_SUFFIX_DEPTH - 1):
            ancestors |= {os.path.dirname(folder) for folder in ancestors}
        for folder in ancestors:
            parts = folder.replace("\\", "/").split("/")
            for i in range(1, min(len(parts) - 1, _SUFFIX_DEPTH) + 1):
                self._folders.setdefault(tuple(parts[-i:]), set()).add(folder)
        for filename in files:
            parts = filename.replace("\\", "/").split("/")
            parts[-1] = parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1]
            if parts[-1] == "__init__":
                parts.pop()
            for i in range(1, min(len(parts), _SUFFIX_DEPTH) + 1):
                self._by_suffix.setdefault(tuple(parts[-i:]), []).append(filename)
        # Imports are resolved only as the walks ask (a model zoo's run holds thousands of files):
        # a file can import another only if an import name of it mentions that file's module's last
        # part, which every way of resolving keeps. An opaque file's imports are never resolved
        # (reach stops at it): the names they mention stand for them (see runners).
        self._mentioning: dict[str, list[str]] = {}
        self._opaque_mentions: set[str] = set()
        # The files that load any module of a package (``SUBMODULES``): what they import is not named.
        self._loading_packages: list[str] = []
        for filename, (_, imports) in files.items():
            mentioned = {part for name in imports for part in name.replace(":", ".").split(".")}
            if filename in opaque:
                self._opaque_mentions |= mentioned
                continue
            if any(name.endswith(SUBMODULES) for name in imports):
                self._loading_packages.append(filename)
            for part in mentioned:
                self._mentioning.setdefault(part, []).append(filename)

    def _roots(self, filename: str) -> tuple[str, ...]:
        """The folders its imports resolve from: its own (a script's `sys.path[0]`) and the folder
        above its top package, or above its own where it is in none."""
        module = self._files[filename][0]
        folder = os.path.dirname(filename)
        up = module.count(".") + (filename in self._packages)
        top = folder
        for _ in range(up):
            top = os.path.dirname(top)
        # (A folder without `__init__.py` may be a namespace package its parent's script imports:
        # `models/model_plain.py` run as `models.model_plain` from KAIR's root.)
        return (folder, os.path.dirname(folder)) if top == folder else (folder, top)

    def _resolve(self, filename: str) -> dict[str, set[str] | None]:
        imports = self._files[filename][1]
        takes: dict[str, set[str] | None] = {}
        # (`from a import c` records `a` beside `a:c`: `a` alone is a plain import only without them)
        from_bases = {name.partition(":")[0] for name in imports if ":" in name}
        roots = self._roots(filename)
        for name in imports:
            if ":" not in name and name in from_bases:
                continue
            key = (roots, name)
            answer = self._answers.get(key)
            if answer is None:
                answer = self._answers[key] = self._resolve_name(roots, name)
            found, left_out = answer
            if left_out:
                self._incomplete.add(filename)
            for target, taken in found.items():
                if target == filename:
                    continue
                if target not in takes:
                    takes[target] = taken if taken is EVERYTHING else set(taken)
                elif takes[target] is not EVERYTHING:
                    if taken is EVERYTHING:
                        takes[target] = EVERYTHING
                    else:
                        takes[target] |= taken
        return takes

    def _resolve_name(self, roots: tuple[str, ...], name: str) -> tuple[dict[str, set[str] | None], bool]:
        """(The files an import name stands for, from these roots, each with what it takes from it;
        whether it may name a file the run left out.) Many files share roots and import names:
        asked once per pair."""
        if name.endswith(SUBMODULES):
            return self._package_modules(roots, name[:-len(SUBMODULES)].split("."))
        base, _, attr = name.lstrip(".").partition(":")
        parts = [p for p in base.split(".") if p]
        found: dict[str, set[str] | None] = {}
        files = self._files
        above = _packages_above(attr)
        for root in roots:
            path = root
            for i, part in enumerate(parts, 1):
                path = path + _SEP + part
                whole = above if i < len(parts) else {attr} if attr else EVERYTHING
                for candidate in (path + ".py", path + _INIT):
                    if candidate in files:
                        found[candidate] = whole
            if attr:  # (`from a import c`: `c` may be a submodule, which it then takes whole)
                path = path + _SEP + attr
                for candidate in (path + ".py", path + _INIT):
                    if candidate in files:
                        found[candidate] = EVERYTHING
        if not found and parts and not name.startswith(".") and self._vendored_elsewhere(parts[0], roots[0]):
            return {}, False  # (the installed library, not another subproject's copy of it)
        if not found and parts:
            found = self._under_another_root(parts, attr)
        if found:
            return found, False
        # (`a` of `from a import c` by name, and `a.c`, which may be a submodule)
        found = dict.fromkeys(self._resolve_elsewhere(base), {attr} if attr else EVERYTHING)
        if attr:
            found.update(dict.fromkeys(self._resolve_elsewhere(f"{base}.{attr}"), EVERYTHING))
        return found, self._left_out(parts, attr, roots, name.startswith("."))

    def _package_modules(self, roots: tuple[str, ...], parts: list[str]) -> tuple[dict[str, set[str] | None], bool]:
        """(Every scanned file under the package's folder, and the packages above it; whether the
        package may be a folder the run left out) for a module of the package loaded by a computed
        name: the folder from the importer's roots, or else every scanned folder whose path ends with
        its parts (a launcher's `sys.path`)."""
        folders = [os.path.join(root, *parts) for root in roots]
        if not any(folder in self._folders.get(tuple(parts[-_SUFFIX_DEPTH:]), ()) for folder in folders):
            folders = [f for f in self._folders.get(tuple(parts), ()) if len(parts) <= _SUFFIX_DEPTH]
        if not folders:
            return {}, self._left_out(parts, "", roots, False)
        found: dict[str, set[str] | None] = {}
        for folder in folders:
            inside = folder + _SEP
            found.update((f, EVERYTHING) for f in self._files if f.startswith(inside))
            for _ in parts[:-1]:  # (the packages above it, which importing it runs)
                folder = os.path.dirname(folder)
                if folder + _INIT in self._files:
                    found[folder + _INIT] = EVERYTHING
        return found, False

    def _vendored_elsewhere(self, package: str, folder: str) -> bool:
        """Is every scanned package of this top-level name a copy of a library vendored into another
        subproject: a folder `F/<package>/` where F is not ``folder`` or above it, and F holds a
        script that trains and imports `<package>` from beside it (CAIL2021's
        `ydlj/baseline/transformers/` for `ydlj/baseline/run_cail2021.py`)? Then an import of it from
        ``folder``, which no root of the importer answers, is of the installed library: Python finds
        F's copy only with F on `sys.path`, which F's own scripts have and another subproject's do
        not. (A `lib/models/` that `tools/train.py` reaches through a launcher's `sys.path.insert`
        has no training script beside it in `lib/`: not a copy.)"""
        key = (package, folder)
        answer = self._vendored.get(key)
        if answer is None:
            copies = [f for f in self._folders.get((package,), ()) if os.path.basename(f) == package]
            answer = self._vendored[key] = bool(copies) and all(
                not (folder + _SEP).startswith(os.path.dirname(copy) + _SEP) and self._trained_beside(copy)
                for copy in copies)
        return answer

    def _trained_beside(self, package: str) -> bool:
        """Does a script beside the package's folder train and import the package (by an absolute
        import of its name): `ydlj/baseline/run_cail2021.py` with `ydlj/baseline/transformers/`?"""
        name = os.path.basename(package)
        return any(os.path.dirname(script) == os.path.dirname(package)
                   and any(imported.lstrip(".").partition(":")[0].split(".")[0] == name and not imported.startswith(".")
                           for imported in self._files.get(script, ("", []))[1])
                   for script in self._training)

    def _left_out(self, parts: list[str], attr: str, roots: tuple[str, ...], relative: bool) -> bool:
        """Does an import that no scanned file answers name a file of the project that the run left
        out (a corpus subset without `models/select_network.py`), rather than an installed library?
        Asked of the disk, where the import would find it: from the importer's roots, or (`lib.models.x`
        from a launcher in `tools/`) in a scanned folder whose path ends with its package's parts.
        Left out whatever the disk holds (a subset may be all there is): a relative import, one
        whose top package is a folder of scanned files beside the importer, and one whose package
        of two parts or more is a scanned folder's (`model.faster_rcnn` of `lib/model/faster_rcnn/`;
        of one part, `transformers`, another subproject's vendored copy proves nothing). A file
        left out may import anything: what the importer reaches is then not all known."""
        if relative:
            return True
        if not parts:
            return False
        beside = self._folders.get((parts[0],), set())
        if any(os.path.join(root, parts[0]) in beside for root in roots):
            return True
        if len(parts) > 2 and tuple(parts[:-1]) in self._folders:
            return True  # (`model.faster_rcnn.vgg16` beside a scanned `lib/model/faster_rcnn/`: a corpus subset)
        folders = [os.path.join(root, *parts[:-1]) for root in roots]
        if len(parts) > 1:
            folders += self._folders.get(tuple(parts[:-1]), ())
        for folder in folders:
            path = os.path.join(folder, parts[-1])
            if os.path.exists(path + ".py") or os.path.isdir(path):
                return True
        return bool(attr) and any(os.path.exists(os.path.join(root, *parts, attr) + ".py") for root in roots)

    def _under_another_root(self, parts: list[str], attr: str) -> dict[str, set[str] | None]:
        """The files an import names under some other root on `sys.path`: those whose paths end
        with its parts (`a/b.py` for `a.b`; `a/b/c.py` as well for `from a.b import c`), and the
        packages above them. Not for an import of one part (`import utils`, `from utils import
        x`): any root's `utils.py` would do, which the names of the modules decide (see _resolve)."""
        found: dict[str, set[str] | None] = {}
        above = _packages_above(attr)
        for names, whole in (((*parts, attr), EVERYTHING), (tuple(parts), {attr} if attr else EVERYTHING)):
            if len(names) < 2 or not names[-1]:
                continue
            for path in self._by_suffix.get(names, ()):
                _take(found, path, whole)
                folder = os.path.dirname(path)
                if os.path.basename(path) == "__init__.py":
                    folder = os.path.dirname(folder)
                for _ in names[:-1]:  # (the packages the import names above the module)
                    package = os.path.join(folder, "__init__.py")
                    if package in self._files:
                        _take(found, package, above)
                    folder = os.path.dirname(folder)
        return found

    def runners(self, wrapping: str, handed: bool = False) -> set[str] | None:
        """The files that run ``wrapping``: it, and its importers up to the scripts; None when it is
        dead: every file at the top (imported by none of them) is a package `__init__.py`, which
        only binds names (see the module's docstring). ``OPAQUE_RUNNER`` where an opaque module
        (not scanned, or loading by a computed name) may import one of them: what it reaches is
        not known, and the importers above need not be followed.

        ``handed``: it wraps what its callers hand it (a trainer's `self.model`). Inside a package
        that the project's other scanned files use as a library (a vendored `transformers/` beside
        a subproject's scripts), such a wrap runs only where a file outside the package builds the
        class that holds it, or a subclass (`Trainer`, `Seq2SeqTrainer`): a module of the package
        that imports it hands on only the classes it defines, not its every name (a library's
        internals import each other densely, `import transformers` for a lookup by name, which
        would make every class of the copy a way to its `Trainer`), and a wrap no file outside
        the package takes such a class for is dead."""
        names: dict[str, set[str] | None] = {wrapping: EVERYTHING}
        library = self._library_package(wrapping) if handed else None
        imported: set[str] = set()  # runners some runner imports: not at the top
        pending = [wrapping]
        while pending:
            target = pending.pop()
            through = names[target]
            if self._leaf(target) in self._opaque_mentions:
                return OPAQUE_RUNNER  # (an opaque file may import it: generous, as the names go)
            for importer in self._importers(target):
                taken = self._takes_of(importer)[target]
                if through is not EVERYTHING and taken is not EVERYTHING and not (taken & through):
                    continue
                imported.add(target)
                # A package's `__init__` hands on only the names it takes; any other module, anything.
                if library and importer not in self._packages and importer.startswith(library):
                    passed = self._classes.get(importer, set())
                    if not passed:
                        continue  # (library code that builds no class of its own around the wrap)
                elif importer not in self._packages or taken is EVERYTHING:
                    passed = EVERYTHING
                else:
                    passed = taken if through is EVERYTHING else taken & through
                known = names.get(importer, set())
                if importer in names and (known is EVERYTHING or passed is not EVERYTHING and passed <= known):
                    continue
                names[importer] = EVERYTHING if passed is EVERYTHING or known is EVERYTHING else known | passed
                pending.append(importer)
        if all(f in self._packages for f in names if f not in imported):
            return None
        if library and all(f.startswith(library) for f in names):
            return None
        return set(names)

    def _library_package(self, filename: str) -> str | None:
        """The folder (with a trailing separator) of the top package that holds ``filename``, where
        the package is a library the project's scripts train with: a script beside its folder
        trains and imports it, and none of its own files trains but ``filename`` (a vendored
        `transformers/`, whose `trainer.py` alone runs a training loop). None where it is in no
        package, or holds the project's training code (BasicSR's `basicsr/train.py` run as a module),
        or the scan holds that package alone (a library checked as one)."""
        folder, top = os.path.dirname(filename), None
        while folder + _INIT in self._files:
            top, folder = folder, os.path.dirname(folder)
        if top is None or not self._trained_beside(top):
            return None
        top += _SEP
        return None if any(f.startswith(top) and f != filename for f in self._training) else top

    def _takes_of(self, filename: str) -> dict[str, set[str] | None]:
        """{file it imports -> what it takes from it} (``EVERYTHING`` or names)."""
        takes = self._takes.get(filename)
        if takes is None:
            takes = self._takes[filename] = {} if filename in self._opaque else self._resolve(filename)
        return takes

    def _importers(self, target: str) -> list[str]:
        """The files that import ``target``."""
        importers = self._mentioning.get(self._leaf(target), [])
        if self._loading_packages:
            importers = [*importers, *(f for f in self._loading_packages if f not in importers)]
        return [f for f in importers if target in self._takes_of(f)]

    def _leaf(self, filename: str) -> str:
        """The last part of the file's module: its stem, or its package's folder."""
        head, name = os.path.split(filename)
        return os.path.basename(head) if filename in self._packages else name[:-3]

    def reach(self, runners: set[str]) -> frozenset[str] | None:
        """Every file the runners import, transitively, themselves included; None (not known) where
        one of them is opaque or imports a project module not found."""
        if runners is OPAQUE_RUNNER:
            return None
        reached, pending = set(), list(runners)
        while pending:
            filename = pending.pop()
            if filename in reached:
                continue
            takes = self._takes_of(filename)
            if filename in self._opaque or filename in self._incomplete:
                return None
            reached.add(filename)
            pending.extend(takes)
        return frozenset(reached)
