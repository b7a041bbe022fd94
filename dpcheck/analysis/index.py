"""The project-wide class index: which classes in the scanned tree are nn.Modules.

Built from the class summaries each file's analysis returns (no second parse), then
used to settle findings whose class's module-ness depended on a base in another file,
and the script conditions of dpcheck.analysis.scripts/wrapping: ``dp:<class>`` (a
DataParallel subclass), ``builder:<function>`` (returns a wrapper), ``bare_builder:<function>``
(returns none) and ``gathered:<class>``
(wrapped in some scanned file, or built as a layer in none), ``dim0:<class>`` (wrapped
with the default batch dim wherever a scanned file wraps it), ``in_model:<class>`` (wrapped,
or built inside a module, in some scanned file), ``outlives_call:<class>`` (an
instance may outlive one forward call: not built only inside forward-reachable code) and
``passed:<class>:<param>@<k>`` (some call of the module passes that parameter of its forward,
or a caller is not known; see dpcheck.analysis.guards) ``prefix_kept:<function>`` (no function
of that simple name strips a wrapper's `module.` prefix; see dpcheck.analysis.checkpoints),
``unresumed:<package>`` (the scanned files of that package do not load checkpoints, as they are,
only into wrappers; see dpcheck.analysis.checkpoints),
``unplaced:<class>`` (the class's constructor does not move it to a device; see
dpcheck.analysis.placement), ``holds_weights:<class>`` (the class may hold weights of its own,
not only what it is handed; see dpcheck.analysis.placement) and ``wrapper_passes:<class>:<param>@<k>``
(some call through a DataParallel wrapper of the class passes that parameter of its forward; see
dpcheck.analysis.guards) and ``scalar_forward:<class>:<passed>`` (the class's forward returns a 0-dim
value when called so; see dpcheck.analysis.outputs) and ``scalar_function:<function>`` (every return of
the function is 0-dim; see dpcheck.analysis.outputs) and ``non_tensor_forward:<class>`` (every return of the
class's forward is a value gather cannot take apart; see dpcheck.analysis.outputs) and
``parameter_property:<class>:<attr>`` (the class
or a base of it has a property <attr> whose getter takes `next(self.parameters())`; see
dpcheck.analysis.model_class) and ``forward_flag:<class>:<attr>`` (the class's own forward tests
`self.<attr>`; see dpcheck.analysis.model_class) and ``stock_method:<method>:<class>`` (the DataParallel subclass keeps the
stock <method>; see dpcheck.analysis.scripts) and ``lacks_attribute:<name>:<class>`` (the DataParallel
subclass has no attribute <name> of its own; see dpcheck.analysis.scripts) and ``handed_wrapper:<function>@<k>``
(a scanned file hands that function or class a DataParallel wrapper there) and ``method_wraps:<method>@<attr>``
(a scanned class's method of that name stores a DataParallel wrapper in `self.<attr>`) and ``called_late:<method>``
(a call of the method may follow another method's call on its instance; see dpcheck.analysis.scripts).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from dpcheck.analysis.bare_calls import EVERY_MENTION, MENTIONED_IN, RETURNED
from dpcheck.analysis.batch_feeds import CALLED_IN, DROPPED, PARTIAL_FEED_CONDITION
from dpcheck.analysis.checkpoints import BARE_LOAD, PREFIX_KEPT, STRIPPED_LOAD, UNRESUMED_CONDITION, WRAPPED_LOAD
from dpcheck.analysis.classes import UNKNOWN_BASE
from dpcheck.analysis.dataflow import BUILT_ONLY_IN_OWN_FILE_CONDITION, BUILT_OUTSIDE_CONDITION
from dpcheck.analysis.devices import UNMOVED_BY_CONDITION
from dpcheck.analysis.file import FileResult
from dpcheck.analysis.functional import PARALLEL_HELPER_CONDITION
from dpcheck.analysis.guards import FALSE_PASSED, UNKNOWN_CALLER, UNPASSED_CONDITION, WRAPPER_PASSES_CONDITION
from dpcheck.analysis.mentions import capitalised
from dpcheck.analysis.model_class import FORWARD_FLAG_CONDITION, PARAMETER_PROPERTY_CONDITION
from dpcheck.analysis.options import OPTION_DEFAULT_CONDITION, OPTION_NOT_DEFAULT_CONDITION, define_option
from dpcheck.analysis.outputs import (
    NON_TENSOR_FORWARD_CONDITION,
    SCALAR_FORWARD_CONDITION,
    SCALAR_FUNCTION_CONDITION,
    scalar_call,
)
from dpcheck.analysis.pairing import STRIDED_PAIRING_CONDITION
from dpcheck.analysis.placement import HOLDS_WEIGHTS, UNPLACED
from dpcheck.analysis.reach import ImportGraph
from dpcheck.analysis.scripts import (
    ARGUMENTS_MARK,
    ARITY_MARK,
    BARE_BUILDER_CONDITION,
    BUILDER_CONDITION,
    FALLBACK_GETATTR,
    GUARD_CONDITION,
    CALLED_LATE_CONDITION,
    EVALUATED_CONDITION,
    HANDED_WRAPPER_CONDITION,
    METHOD_WRAPS_CONDITION,
    INIT_WRAPPED_CONDITION,
    WRAPPING_METHOD_CONDITION,
    KEEPS_LAST,
    LACKS_ATTRIBUTE_CONDITION,
    OWN_METHOD_CONDITION,
    PARTIAL_BATCHES_CONDITION,
    REDUCED_MARK,
    REJECTS_CALL_CONDITION,
    RETURNED_ELEMENT,
    STOCK_METHOD_CONDITION,
    STOCK_OUTPUT_CONDITION,
    UNCALLED_CONDITION,
    UNREDUCED_GATHER_CONDITION,
    WRAPPED_ATTRIBUTE_CONDITION,
    guard_fails,
)
from dpcheck.analysis.torch_api import MODULE_BASES, MODULE_CONTAINERS, is_torch_nn_class, never_module, parameter_free
from dpcheck.analysis.handed import OWN_INIT, PASSED_ON, UNTRACED, USED_OTHERWISE
from dpcheck.analysis.wrapping import (CALL_LEAF, CALLED_RETURN, HANDED_LEAF, ITEMS_LEAF, KEPT_MODULE_CONDITION,
                                       MODULES_LEAF, OVERRIDE_LEAF, PART_LEAF, UNTRACED_ITEM)
from dpcheck.constants import DATAPARALLEL_CLASSES, TRAINER_NAME_PACKAGES, TRAINER_PACKAGES
from dpcheck.findings import Finding


class Pending(Exception):
    """Raised by a ``load_module`` that cannot answer yet (the module is being summarised
    elsewhere, see ``engine.ModuleSummaries``): the question asked of the index is abandoned,
    and the module is asked for again the next time a name needs it."""


class ClassIndex:
    def __init__(self, results: Iterable[FileResult], load_module=None) -> None:
        """``load_module(dotted) -> FileResult | None`` summarises a module that was not
        scanned (pre-commit passes only changed files; their bases live elsewhere)."""
        self.load_module = load_module
        self._loaded: set[str] = set()
        self.bases: dict[str, tuple[str, ...]] = {}
        self.aliases: dict[str, str] = {}  # "pkg.models.Block" -> "pkg.models.block.Block"
        # module -> the modules its star imports read from, in order; module -> its literal `__all__`.
        self._star_imports: dict[str, list[str]] = {}
        self._declared_all: dict[str, frozenset[str]] = {}
        by_tail: dict[str, list[str]] = {}
        self._by_tail = by_tail
        # Indexed modules by their last dotted part, for re-exports scanned from another root (a set:
        # two scanned files may take one module name, and name one module).
        self._modules_by_leaf: dict[str, set[str]] = {}
        self._memo: dict[str, bool] = {}
        self.builders: dict[str, list[str]] = {}
        self._wrapped_names: set[str] = set()
        # Classes some file wraps only behind switches off by default -> each such site's switches
        # (wrapping.latent_wraps); the classes some file wraps at a site that runs by default.
        self._latent_wraps: dict[str, list[str]] = {}
        self._live_wrapped: set[str] = set()
        self._submodule_names: set[str] = set()
        self._layers_of: dict[str, set[str]] = {}  # simple name of a class -> the classes it builds as layers
        self._wrapped_dims: dict[str, str] = {}
        self._unresolved_wraps = 0
        self._wrapped_alone: set[str] = set()  # wrapping.wrapped_alone of some file...
        self._wrapped_not_alone: set[str] = set()  # ...and not of all files that wrap it
        self._missing: set[str] = set()  # dotted names load_module found no file for
        self._path_names: set[str] = set()  # folder and module names on the paths of the files indexed
        self._replaced_output: set[str] = set()  # DataParallel subclasses (scripts.replaced_output)
        self._own_attributes: dict[str, set[str]] = {}  # DataParallel subclass -> what it defines (scripts)
        self._wrappers: dict[str, set[str]] = {}  # class wrapped -> its wrappers (wrapping.wrappers_of)
        self._wrap_candidates: list[list[str]] = []  # wrapping.wrap_candidates of every file
        self._returns: dict[str, list[str]] = {}  # function -> its returns' leaves (wrapping.function_returns)
        self._untraced_functions: set[str] = set()  # the other module-level functions (wrapping.untraced_functions)
        self._method_returns: dict[str, list[str]] = {}  # builder methods -> their leaves (wrapping.method_returns)
        self._wrapped_roots: list[str] = []  # what the scanned files wrap, candidates included (_classes_in_use)
        self._unused: set[str] = set()
        # Classes their own file never names, capitalised names the files mention, and whether a
        # file looks classes up by a computed name (mentions.summarize_mentions).
        self._unnamed: set[str] = set()
        self._mentions: set[str] = set()
        self._builds_by_name = False
        self._by_name_modules: set[str] = set()  # the modules that may look up any class by a computed name
        self._lookup_namespaces: set[str] = set()  # modules looked up by a computed name (mentions)
        self._built_per_call: set[str] = set()
        self._built_elsewhere: set[str] = set()
        # For built_outside: simple name -> the modules that build a class of that name they neither
        # define nor import by name (a star import may bind it). (Imports are read off ``aliases``.)
        self._built_unresolved: dict[str, set[str]] = {}
        self._module_calls: dict[str, set[str]] = {}  # class -> what its calls pass (guards.module_calls)
        self._wrapper_calls: dict[str, list[str]] = {}  # class -> what each call of its wrappers passes
        self._prefix_strippers: set[str] = set()  # functions that strip `module.` keys (checkpoints)
        # How the scanned files of each package load checkpoints as they are: package -> WRAPPED_LOAD,
        # BARE_LOAD (checkpoints).
        self._checkpoint_loads: dict[str, set[str]] = {}
        self._self_placing: set[str] = set()  # classes whose constructor moves them (placement)
        self._weightless: dict[str, list[str]] = {}  # class -> the classes its constructor builds (placement)
        self._scalar_forwards: dict[str, list[str]] = {}  # class -> what decides its 0-dim forward (outputs)
        self._scalar_functions: set[str] = set()  # functions every return of which is 0-dim (outputs)
        self._options: dict[str, str] = {}  # command-line option -> its default's truth (options)
        self._non_tensor_forwards: set[str] = set()  # classes whose forward returns no tensor (outputs)
        self._parameter_properties: dict[str, list[str]] = {}  # class -> properties taking next(parameters())
        self._forward_flags: dict[str, list[str]] = {}  # class -> attributes of self its forward tests
        # Attributes of other objects that scripts store wrappers in -> the packages of those scripts.
        self._wrapped_attributes: dict[str, set[str]] = {}
        # Functions that pass two parameters on to the functional data_parallel -> (module, inputs) positions.
        self._parallel_helpers: dict[str, tuple[str, ...]] = {}
        self._pairing_helpers: dict[str, frozenset[str]] = {}
        self._moving_helpers: dict[str, frozenset[str]] = {}  # function -> `<k>|<name>` it moves (devices)
        self._init_wrapped: dict[str, set[str]] = {}
        self._wrapping_methods: dict[str, set[str]] = {}  # method name -> the classes defining it
        self._method_wraps: set[str] = set()  # `<method>@<attr>` some scanned class's method wraps
        # Method names some scanned file calls on an instance it has just built; those called otherwise.
        self._fresh_calls: set[str] = set()
        self._later_calls: set[str] = set()
        # The scanned (not loaded) modules that record such calls: the code driving instances.
        self._calling_modules: set[str] = set()
        # Imported functions and classes that scripts hand a DataParallel wrapper, as the calling file
        # resolves them -> `<position or keyword>=<attributes set on wrappers there>` (scripts.handed_wrappers).
        self._handed: dict[str, set[str]] = {}
        # `<attr>@<class>` -> what that class puts into `self.<attr>` item by item (wrapping.item_stores).
        self._item_stores: dict[str, list[str]] = {}
        self._calls_canonical: dict[str, set[str]] | None = None
        # scripts.partial_batches of the files that wrap a model: how many there are, and whether
        # one of them keeps the partial last batch (see keeps_partial_batches).
        self._wrapping_files = 0
        self._evaluating_files: set[str] = set()  # files that may put a model in eval mode (scripts.switches_to_eval)
        self._kept_modules: dict[str, list[str]] = {}  # class -> `__init__` parameters kept as submodules
        # Every function or method name a scanned file calls other than as a fed call, and each fed
        # call's markers by name (batch_feeds; see feeds_partial_batches).
        self._called: set[str] = set()
        self._batch_feeds: dict[str, set[str]] = {}
        self._keeps_last = False
        # Each class a file wraps (traced to it) -> whether one of the files that wrap it keeps the
        # partial last batch (see keeps_partial_batches).
        self._wrapped_keeps_last: dict[str, bool] = {}
        # Project-wide answers computed from every summary indexed so far (see _derived), by name ->
        # (the generation they were computed at, the answer); the generation counts the summaries added.
        self._generation = 0
        self._derived_facts: dict[str, tuple[int, object]] = {}
        # Every import target (each once: a model library imports the same few names in every
        # file, 38k targets for 4k names on transformers `models/`); their `module.Class` tails are
        # taken only when ``offline`` is first asked (the guessing index of engine.ModuleSummaries
        # never asks it).
        self._import_targets: set[str] = set()
        # Classes built and only called outside any module: simple name -> each binding ("" for a
        # local, `<attr>:<holder class>` for an attribute); the names files use otherwise; the
        # attributes files read otherwise (bare_calls).
        self._bare_built: dict[str, list[str]] = {}
        self._escaping: set[str] = set()
        self._mentioned_in: dict[str, set[str]] = {}  # class -> the module classes whose bodies name it (bare_calls)
        # Function name -> how the files that call it bind what it returns, where every call of a file
        # is bound so (result_bindings); the names some file calls otherwise (or a file no rule walks).
        self._result_bindings: dict[str, set[str]] = {}
        self._result_escapes: set[str] = set()
        self._passed_attributes: set[str] = set()
        # Module -> the import names of its files (FileResult.imports): which modules an import name
        # may stand for, by name (_imported_modules).
        self._imports: dict[str, list[str]] = {}
        # File by file (see reach.ImportGraph): file -> (module, its imports); module -> its files; the
        # files that load a module by a computed name or were not scanned; each file that wraps -> (what it wraps, what it
        # wraps alone, its wrap candidates, how many wrap sites it did not trace).
        self._file_imports: dict[str, tuple[str, list[str]]] = {}
        self._files_of_module: dict[str, set[str]] = {}
        self._opaque_files: set[str] = set()
        self._wrap_sites: dict[str, tuple[list[str], set[str], list[list[str]], int]] = {}
        self._handed_sites: set[str] = set()  # those that wrap what they are handed (wrapping.handed_wrap_sites)
        self._classes_of_file: dict[str, set[str]] = {}  # file -> the simple names of the classes it defines
        # Each wrap site that runs -> the files it reaches (None: not known), and what it uses.
        self._site_reach: list[tuple[str, frozenset[str] | None]] | None = None
        self._site_uses: dict[str, tuple[frozenset[str], list[str]]] = {}
        # What the calls of the files that record them hand each callee (handed.handed_calls): callee ->
        # each call's arguments (`<k or keyword>=<leaves>`, PASSED_ON), USED_OTHERWISE among them where a
        # file uses its name otherwise; the classes of those files that define `__init__`; their modules;
        # the simple names the other files call (FileResult.called).
        self._handed_calls: dict[str, list[list[str]]] = {}
        self._own_inits: set[str] = set()
        self._recorded_modules: set[str] = set()
        self._called_unrecorded: set[str] = set()
        # The files that run a training loop of their own (FileResult.trains), and why the project
        # is an application that does not use DataParallel ("": it is not; None: not asked yet).
        self._training_files: list[str] = []
        self._replicates = False  # some file replicates a model by hand (FileResult.replicates)
        self._no_dataparallel: str | None = None
        for result in results:
            self._add(result)
        # `module.Class` of the classes this run checks (not of loaded modules; the same file
        # loaded for an import may carry a longer dotted name than the scanned one).
        self._scanned = frozenset(_tail(q) for q in self.bases)

    def add(self, result: FileResult) -> None:
        """Index one more file's summary (answers already given may change)."""
        self._add(result)
        self._memo.clear()

    def _add(self, result: FileResult, loaded: bool = False) -> None:
        self._generation += 1
        self._loaded.add(result.module)
        # (Two scripts of one name in different folders are one module here: both its imports count.)
        self._imports.setdefault(result.module, []).extend(result.imports)
        filename = os.path.abspath(result.filename)
        # A scanned file loaded again under another dotted name (a folder without `__init__.py`, imported
        # from a higher root): its aliases rename its own classes, which no file thereby imports.
        twin = loaded and filename in self._file_imports and self._file_imports[filename][0] != result.module
        # (A module loaded for an import may be a scanned file again, under a longer dotted name: the
        # scanned record decides where its imports resolve from.)
        if filename not in self._file_imports:
            self._file_imports[filename] = (result.module, result.imports)
            self._classes_of_file[filename] = {cls.qualname.rsplit(".", 1)[-1] for cls in result.classes}
            if loaded:  # (summarised for a name, not scanned: a file left out of the run, which may
                self._opaque_files.add(filename)  # be the project's way to anything, as far as it shows)
        self._files_of_module.setdefault(result.module, set()).add(filename)
        # (A file that only holds wrappers other files' builders make, with no wrap of its own, is no
        # site: those builders' files are, and it runs them.)
        if result.unresolved_wraps or result.wrapped or result.wrap_candidates or result.wrapped_alone:
            self._wrap_sites[filename] = (list(result.wrapped), set(result.wrapped_alone),
                                          list(result.wrap_candidates), len(result.unresolved_wraps))
            if result.handed_wraps:
                self._handed_sites.add(filename)
        if result.loads_by_name:
            self._opaque_files.add(filename)
        self._site_reach = None
        self._site_uses.clear()
        if result.trains:
            self._training_files.append(filename)
        self._replicates = self._replicates or result.replicates
        self._no_dataparallel = None
        self._modules_by_leaf.setdefault(result.module.rpartition(".")[2], set()).add(result.module)
        for cls in result.classes:
            self.bases.setdefault(cls.qualname, cls.bases)
            self._by_tail.setdefault(_tail(cls.qualname), []).append(cls.qualname)
        module = result.module
        for name, target in result.aliases.items():
            self.aliases[f"{module}.{name}"] = target
        if not twin:
            self._import_targets.update(result.aliases.values())
        if result.star_imports:
            self._star_imports[module] = result.star_imports
        if result.declared_all is not None:
            self._declared_all[module] = frozenset(result.declared_all)
        self.builders.update(result.builders)
        self._wrapped_names.update(result.wrapped)
        for name, sites in result.latent_wraps.items():
            self._latent_wraps.setdefault(name, []).extend(sites)
        self._live_wrapped.update(name for name in result.wrapped if name not in result.latent_wraps)
        self._submodule_names.update(result.submodules)
        for part, owners in result.layer_owners.items():
            for owner in owners:
                self._layers_of.setdefault(owner, set()).add(part)
        self._wrapped_dims.update(result.wrapped_dims)
        self._unresolved_wraps += len(result.unresolved_wraps)
        self._wrapped_alone.update(result.wrapped_alone)
        self._path_names.update(result.filename.removesuffix(".py").replace("\\", "/").split("/"))
        self._replaced_output.update(result.replaced_output)
        for name, attributes in result.dataparallel_attributes.items():
            self._own_attributes.setdefault(name, set()).update(attributes)
        for name, wrappers in result.wrappers.items():
            self._wrappers.setdefault(name, set()).update(wrappers)
        self._wrapped_not_alone.update(set(result.wrapped).difference(result.wrapped_alone))
        self._wrap_candidates.extend(result.wrap_candidates)
        self._returns.update(result.returns)
        self._untraced_functions.update(result.untraced_functions)
        self._method_returns.update(result.method_returns)
        self._unused.update(result.unused)
        self._unnamed.update(result.unnamed)
        self._mentions.update(result.mentions)
        self._builds_by_name = self._builds_by_name or result.builds_by_name
        if result.builds_by_name:
            self._by_name_modules.add(module)
        self._lookup_namespaces.update(result.lookup_namespaces)
        self._built_per_call.update(result.built_per_call)
        self._built_elsewhere.update(result.built_elsewhere)
        if result.built_per_call or result.built_elsewhere:
            own = {cls.qualname.rpartition(".")[2] for cls in result.classes}.union(result.aliases)
            for name in (*result.built_per_call, *result.built_elsewhere):
                if name[:1].isupper() and name not in own:  # (lower-case calls are locals and functions)
                    self._built_unresolved.setdefault(name, set()).add(module)
        for name, markers in result.module_calls.items():
            self._module_calls.setdefault(name, set()).update(markers)
        for name, calls in result.wrapper_calls.items():
            self._wrapper_calls.setdefault(name, []).extend(calls)
        self._prefix_strippers.update(result.prefix_strippers)
        if result.checkpoint_loads:
            package = result.module.rpartition(".")[0]
            self._checkpoint_loads.setdefault(package, set()).update(result.checkpoint_loads.split())
        self._self_placing.update(result.self_placing)
        self._weightless.update(result.weightless)
        self._scalar_forwards.update(result.scalar_forwards)
        self._scalar_functions.update(f"{module}.{name}" for name in result.scalar_functions)
        for entry in result.options:
            name, _, state = entry.partition("=")
            define_option(self._options, name, state)
        self._non_tensor_forwards.update(result.non_tensor_forwards)
        self._kept_modules.update(result.kept_modules)
        self._called.update(result.called)
        if result.calls_recorded:
            self._recorded_modules.add(module)
            for entry in result.handed_calls:
                callee, *passed = entry.split("|")
                if passed == [OWN_INIT]:
                    self._own_inits.add(callee)
                else:
                    self._handed_calls.setdefault(callee, []).append(passed)
        else:
            self._called_unrecorded.update(result.called)
        for entry in result.batch_feeds:
            name, marker = _feed_entry(entry)
            self._batch_feeds.setdefault(name, set()).add(marker)
        if result.switches_to_eval:
            self._evaluating_files.add(os.path.abspath(result.filename))
        if result.partial_batches:
            self._wrapping_files += 1
            self._keeps_last = self._keeps_last or result.partial_batches == KEEPS_LAST
            for name in result.wrapped:
                self._wrapped_keeps_last[name] = self._wrapped_keeps_last.get(name, False) \
                    or result.partial_batches == KEEPS_LAST
        self._parameter_properties.update(result.parameter_properties)
        self._forward_flags.update(result.forward_flags)
        for name, positions in result.parallel_helpers.items():
            self._parallel_helpers[f"{module}.{name}"] = tuple(positions)
        for name, positions in result.pairing_helpers.items():
            self._pairing_helpers[f"{module}.{name}"] = frozenset(positions)
        for name, moved in result.moving_helpers.items():
            self._moving_helpers[f"{module}.{name}"] = frozenset(moved)
        for attr in result.wrapped_attributes:
            self._wrapped_attributes.setdefault(attr, set()).add(result.module.rpartition(".")[0])
        for entry in result.bare_built:
            name, _, binding = entry.partition(":")
            self._bare_built.setdefault(name, []).append(binding)
        for name in (result.mentions if EVERY_MENTION in result.escaping else result.escaping):
            name, _, owner = name.partition(MENTIONED_IN)
            if owner:
                self._mentioned_in.setdefault(name, set()).add(owner)
            else:
                self._escaping.add(name)
        self._passed_attributes.update(result.passed_attributes)
        bound = set()
        for entry in result.result_bindings:
            name, _, binding = entry.partition("=")
            self._result_bindings.setdefault(name, set()).add(binding)
            bound.add(name)
        self._result_escapes.update(name for name in result.called if name not in bound)
        self._result_escapes.update(name for name in map(_feed_name, result.batch_feeds) if name not in bound)
        for key, leaves in result.item_stores.items():
            self._item_stores.setdefault(key, []).extend(leaves)
        for name, attrs in result.init_wrapped.items():
            self._init_wrapped.setdefault(name, set()).update(attrs)
        self._fresh_calls.update(result.fresh_calls)
        self._later_calls.update(result.later_calls)
        if (result.fresh_calls or result.later_calls) and not loaded:
            self._calling_modules.add(module)
        for entry in result.handed_wrappers:
            callee, _, position = entry.partition("=")[0].rpartition("@")
            stored = entry.partition("=")[2]
            self._handed.setdefault(callee, set()).add(f"{position}={stored}")
        for name, entries in result.wrapping_methods.items():
            for entry in entries:
                self._wrapping_methods.setdefault(entry.partition("@")[0], set()).add(name)
                self._method_wraps.add(entry)
        self._calls_canonical = None

    def _load_for(self, name: str) -> bool:
        """Summarise the module that should define ``name``; True if anything new was added."""
        if self.load_module is None:
            return False
        module = name.rpartition(".")[0]
        for candidate in (module, name):
            if candidate and candidate not in self._loaded:
                self._loaded.add(candidate)
                try:
                    result = self.load_module(candidate)
                except Pending:
                    self._loaded.discard(candidate)
                    raise
                if result is not None:
                    self._add(result, loaded=True)
                    self._memo.clear()
                    return True
                self._missing.add(candidate)
        return False

    def _library_class(self, name: str) -> bool:
        """Is ``name`` a class no file of the project defines: not indexed, the module lookup found no
        file for its module, and its top-level package names no folder or module on the paths of
        the files indexed (`cpc.criterion.X` beside a scanned `cpc/model.py` is the project's, in a
        package whose `__init__.py` the scan left out; `torchaudio.models.WaveRNN` is a library's)?"""
        return self.load_module is not None and self.lookup(name) is None \
            and name.rpartition(".")[0] in self._missing and name.partition(".")[0] not in self._path_names

    def lookup(self, name: str, stars: bool = True, trail: frozenset[str] = frozenset()) -> str | None:
        """The indexed class a dotted name refers to, following re-exports (and, with ``stars``, star
        imports). ``trail``: the modules whose star imports are being followed (a package that star-
        imports a module which imports a name back from the package is a cycle)."""
        for _ in range(8):
            if name not in self.bases and name not in self.aliases:
                self._load_for(name)
            if name in self.bases:
                return name
            if name in self.aliases:
                name = self.aliases[name]
                continue
            break
        found = self._star_imported(name, trail) if stars else None
        if found is not None:
            return found
        # Scanned from a different root than the imports assume: match `module.Class` uniquely,
        # or a re-export `package.Class` uniquely (`from torchmeta.modules import DataParallel`
        # with `torchmeta/__init__.py` outside the scan: the package's module is `modules`).
        candidates = self._by_tail.get(_tail(name), [])
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            return None
        package, _, simple = name.rpartition(".")
        leaf = package.rpartition(".")[2]
        exports = [key for module in self._modules_by_leaf.get(leaf, ())
                   for key in [f"{module}.{simple}"] if key in self.aliases and key != name]
        if len(exports) == 1:
            target = self.aliases[exports[0]]
            candidates = [target] if target in self.bases else self._by_tail.get(_tail(target), [])
            return candidates[0] if len(candidates) == 1 else None
        return None

    def _star_imported(self, name: str, trail: frozenset[str] = frozenset()) -> str | None:
        """The indexed class ``module.Name`` is bound to by a star import of that module (`from losses
        import *` then `GeneratorLoss(...)`): the last star-imported module whose star import binds
        the name (its `__all__` lists it, or it declares none and the name is public) and that
        defines, imports or itself star-imports it."""
        module, _, simple = name.rpartition(".")
        sources = self._star_imports.get(module)
        if not sources or module in trail:
            return None
        for source in reversed(sources):
            key = f"{source}.{simple}"
            if key not in self.bases and key not in self.aliases:
                self._load_for(key)
            declared = self._declared_all.get(source)
            if simple not in declared if declared is not None else simple.startswith("_"):
                continue
            if key in self.bases:
                return key
            if key in self.aliases:
                if self.aliases[key].rpartition(".")[0] in trail | {module}:
                    # It imports the name back from the package being resolved (nnsvs: `layers/__init__.py`
                    # star-imports `residual_block`, which defines Conv1d, then `upsample`, which does
                    # `from nnsvs.usfgan.layers import Conv1d`): an earlier star import bound it.
                    continue
                return self.lookup(key, trail=trail | {module})
            found = self._star_imported(key, trail | {module})
            if found is not None:
                return found
        return None

    def is_module(self, name: str, trail: frozenset[str] = frozenset()) -> bool:
        if name in MODULE_BASES or is_torch_nn_class(name):
            return True
        if name.startswith(UNKNOWN_BASE):  # a class that reads like a module, on a base defined nowhere
            return self.lookup(name[len(UNKNOWN_BASE):]) is None
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

    def is_dataparallel(self, name: str, trail: frozenset[str] = frozenset()) -> bool:
        if name in DATAPARALLEL_CLASSES:
            return True
        target = self.lookup(name)
        if target is None or target in trail:
            return False
        return any(self.is_dataparallel(base, trail | {target}) for base in self.bases[target])

    def stock_output(self, name: str, trail: frozenset[str] = frozenset()) -> bool:
        """Does a call of this DataParallel (subclass) return the stock gathered output: no class on
        its way down to DataParallel has a forward of its own that returns something else? (A class
        not found counts as stock.)"""
        if name in DATAPARALLEL_CLASSES:
            return True
        target = self.lookup(name)
        if target is None or target in trail:
            return True
        if target in self._replaced_output:
            return False
        return all(self.stock_output(base, trail | {target}) for base in self.bases[target]
                   if self.is_dataparallel(base))

    def defines(self, wrapper: str, method: str, trail: frozenset[str] = frozenset()) -> bool:
        """Does this DataParallel subclass, or a class on its way down to DataParallel, define its own
        ``method`` (see scripts.dataparallel_attributes)? (torch's classes, and a class not found, do not.)"""
        target = self.lookup(wrapper)
        if target is None or target in trail or not self.is_dataparallel(target):
            return False
        return method in self._own_attributes.get(target, ()) or any(
            self.defines(base, method, trail | {target}) for base in self.bases[target])

    def has_attribute(self, wrapper: str, name: str) -> bool:
        """Can a script read ``name`` on this DataParallel subclass's wrapper: does it, or a class on its
        way down to DataParallel, define that attribute, or a `__getattr__` that answers for any? With
        ``builder:<function>``, on every wrapper that builder may return (none: a stock one)."""
        if wrapper.startswith(BUILDER_CONDITION):
            wrappers = self.builder_wrappers(wrapper[len(BUILDER_CONDITION):])
            return bool(wrappers) and all(self.has_attribute(w, name) for w in wrappers)
        return self.defines(wrapper, name) or self.defines(wrapper, FALLBACK_GETATTR)

    def rejects_call(self, wrapper: str, method: str, count: int) -> bool:
        """Does the wrapper's own ``method`` (its class's, or a base's on the way down to DataParallel)
        take fewer positional arguments than ``count``? With ``builder:<function>``, some wrapper that
        builder may return; False where no class defines the method or its arguments are not known."""
        if wrapper.startswith(BUILDER_CONDITION):
            return any(self.rejects_call(w, method, count)
                       for w in self.builder_wrappers(wrapper[len(BUILDER_CONDITION):]))
        most = self._arity(wrapper, method, frozenset())
        return most is not None and count > most

    def _arity(self, wrapper: str, method: str, trail: frozenset[str]) -> int | None:
        target = self.lookup(wrapper)
        if target is None or target in trail or not self.is_dataparallel(target):
            return None
        own = self._own_attributes.get(target, ())
        if method in own:
            prefix = f"{method}{ARITY_MARK}"
            return next((int(a[len(prefix):-1]) for a in own if a.startswith(prefix)), None)
        return next((n for base in self.bases[target]
                     if (n := self._arity(base, method, trail | {target})) is not None), None)

    def reduces_gather(self, wrapper: str, position: str, trail: frozenset[str] = frozenset()) -> bool:
        """Does the wrapper's own `gather` (its class's, or a base's on the way down to DataParallel)
        reduce the output's part at ``position`` ("" for the whole output) on every return (see
        scripts.reduced_positions)? False where no class defines a gather (the stock one reduces nothing)."""
        target = self.lookup(wrapper)
        if target is None or target in trail or not self.is_dataparallel(target):
            return False
        own = self._own_attributes.get(target, ())
        if "gather" in own:
            return f"gather{REDUCED_MARK}" in own or f"gather{REDUCED_MARK}{position}" in own
        return any(self.reduces_gather(base, position, trail | {target}) for base in self.bases[target])

    def builder_wrappers(self, name: str) -> set[str]:
        """The DataParallel subclasses of the project that the builder ``name`` (followed through
        re-exports, as ``returns_wrapper`` does) wraps what it returns in; empty where it may return a
        stock wrapper or is not known."""
        name = name.partition(ARGUMENTS_MARK)[0]
        base, mark, element = name.partition(RETURNED_ELEMENT)
        for _ in range(8):
            if base + mark + element in self.builders or base not in self.aliases:
                break
            base = self.aliases[base]
        conditions = self.builders.get(base + mark + element, ())
        return {c.partition(":")[2] for c in conditions if c.startswith("dp:")}

    def own_method(self, text: str) -> str | None:
        """``<method>:<class>``: why the class's findings about that stock DataParallel method are advice
        only, or None: some scanned file wraps the class, and every wrap of it in the scanned files is
        by a subclass that defines its own ``method`` (a wrap through a builder or a registry, whose
        wrapper is not recorded per class, counts as a stock one)."""
        method, _, name = text.partition(":")
        wrappers: set[str] = set()
        for wrapped, names in list(self._wrappers.items()):
            if (self.lookup(wrapped) or wrapped) == name:
                wrappers.update(names)
        if not wrappers or not all(self.defines(w, method) for w in wrappers):
            return None
        simple = name.rsplit(".", 1)[-1]
        if any((self.lookup(leaf) or leaf).rsplit(".", 1)[-1] == simple
               for leaves in list(self._wrap_candidates) for leaf in leaves):
            return None
        shown = " and ".join(sorted(f"`{w.rsplit('.', 1)[-1]}`" for w in wrappers))
        return (f"every scanned file wraps `{simple}` in {shown}, which defines its own `{method}`: "
                f"what becomes of this is up to that code, not DataParallel's")

    def advice(self, condition: str) -> str | None:
        """Why a finding that carries ``condition`` in its ``advice_if`` is advice only, or None."""
        kind, _, rest = condition.partition(":")
        if f"{kind}:" == OWN_METHOD_CONDITION and rest:
            return self.own_method(rest)
        if f"{kind}:" == BUILT_ONLY_IN_OWN_FILE_CONDITION and rest:
            classes = rest.split(",")
            if any(self.built_outside(name) for name in classes):
                return None
            shown = " and ".join(f"`{name.rsplit('.', 1)[-1]}`" for name in classes)
            return (f"every construction of {shown} (all in its own file) passes the option a value "
                    "that skips this path, and no other scanned file builds it: the path does not run")
        if f"{kind}:" == UNCALLED_CONDITION and rest:
            return self.uncalled(rest)
        if f"{kind}:" == UNPASSED_CONDITION and rest and not self.passed(rest):
            param = rest.rpartition(":")[2].partition("@")[0]
            if rest.endswith(FALSE_PASSED):  # (its default is False: a caller passing False keeps it off)
                return f"it runs only when `{param}` is passed a true value, and no scanned caller passes one"
            return f"it runs only when `{param}` is passed, and no scanned caller passes it"
        return None

    def returns_wrapper(self, name: str, trail: frozenset[str] = frozenset()) -> bool:
        """Does the function ``name`` (followed through re-exports) return a DataParallel wrapper? (With
        `#<i>`, as the i-th element of the tuple it returns: see scripts.RETURNED_ELEMENT; with `?[...]`,
        to a call that passes those arguments: see scripts.guard_fails.)"""
        name, _, arguments = name.partition(ARGUMENTS_MARK)
        arguments = arguments and ARGUMENTS_MARK + arguments
        name, mark, element = name.partition(RETURNED_ELEMENT)
        for _ in range(8):
            if name + mark + element in self.builders or name not in self.aliases:
                break
            name = self.aliases[name]
        name += mark + element
        if name not in self.builders or name in trail:
            return False
        return all(not guard_fails(c, arguments) if c.startswith(GUARD_CONDITION) else self.condition(c, trail | {name})
                   for c in self.builders[name])

    def _derived(self, name: str, compute):
        """A project-wide answer (``compute()``) from every summary indexed so far, kept until another
        is added. A lookup may summarise a module that was not scanned (``_load_for``), whose names and
        mentions then count: the answer is computed again, also where that happened while computing
        it, so that no answer depends on which question was asked first. (Each module is summarised
        once: this ends.)"""
        held = self._derived_facts.get(name)
        if held is not None and held[0] == self._generation:
            return held[1]
        while True:
            generation = self._generation
            value = compute()
            if generation == self._generation:
                self._derived_facts[name] = (generation, value)
                return value

    def wrapped(self, name: str) -> bool:
        """Does some scanned file wrap an instance of this class in DataParallel?"""
        return name in self._canonical()[0]

    def _canonical(self) -> tuple[set[str], set[str]]:
        """(The classes the scanned files wrap, those they build as layers), as lookup resolves them."""
        return self._derived("canonical", self._canonical_names)

    def _canonical_names(self) -> tuple[set[str], set[str]]:
        # (lookup may summarise unscanned modules, which adds names: iterate over copies)
        simple = {q.rsplit(".", 1)[-1] for q in list(self.bases)}
        # A name bound by a star import counts for a wrap, never for a submodule: a script's class
        # that builds the model it hands on (a trainer's `get_model`) is recorded as building a
        # submodule, which would demote the wrapped model's findings (heldout SOICT's PhobertBIO).
        # (A name that is no class's may be a module's alias of one: `Model = DetectionModel`.)
        return tuple({self.lookup(n, stars) or n for n in list(names) if n.rsplit(".", 1)[-1] in simple or n in self.aliases}
                     for names, stars in ((self._wrapped_names | self._item_wrapped(), True),
                                          (set(self._submodule_names), False)))

    def gathered(self, name: str) -> bool:
        """Wrapped in some scanned file, or built as a layer of a module in none."""
        wrapped, submodules = self._canonical()
        return name in wrapped or name not in submodules or name in self._settled_wrapped()

    def _settled_wrapped(self) -> frozenset[str]:
        """The classes that wrap sites traced through a builder hold (a function of another file, a
        method that subclasses override: each site's candidates, settled on their own, so that a site
        traced counts where another is not), also where some module builds them as a layer."""
        return self._derived("settled", self._settled_wrapped_names)

    def _settled_wrapped_names(self) -> frozenset[str]:
        found: set[str] = set()
        builders = [[CALL_LEAF + name] for name in list(self._wrapped_names) if self.lookup(name) is None]
        for leaves in [*builders, *self._wrap_candidates]:
            settled = self._settle_leaves(leaves)
            if settled is not None:
                found.update(self.lookup(name) or name for name in settled[0])
        return frozenset(found)

    def in_model(self, name: str) -> bool:
        """Does some scanned file wrap this class, or build it inside a module (a layer, or a part
        handed to the constructor of the model a script wraps)? Then its forward may run on replicas.
        A class built only by classes that the index shows are no modules (a trainer or engine whose
        bases are all scanned plain classes: `self.criterion = CrossEntropyLoss()` in torchreid's
        engines), none of them built inside a module in turn, is not: its file could not tell."""
        wrapped, submodules = self._canonical()
        return name in wrapped or name in submodules and name not in self._derived("plain_held", self._plain_held)

    def _plain_held(self) -> frozenset[str]:
        """The classes (as lookup resolves them) every builder of which is a plain class, itself one
        of these or built by no module (see ``in_model``)."""
        qualnames: dict[str, list[str]] = {}
        for qualname in list(self.bases):
            qualnames.setdefault(qualname.rsplit(".", 1)[-1], []).append(qualname)
        owners_of: dict[str, set[str]] = {}
        for owner, parts in list(self._layers_of.items()):
            for part in parts:
                owners_of.setdefault(self.lookup(part) or part, set()).add(owner)
        plain = {owner for owners in owners_of.values() for owner in owners
                 if owner in qualnames and all(self._plain_class(q) for q in qualnames[owner])}
        held = {part for part, owners in owners_of.items() if owners <= plain}
        wrapped = {name.rsplit(".", 1)[-1] for name in self._canonical()[0]}
        changed = True
        while changed:  # a plain owner that a module builds (or a script wraps) runs where that module runs
            changed = False
            for part in sorted(held):
                if any(owner in wrapped or any(q in owners_of and q not in held for q in qualnames[owner])
                       for owner in owners_of[part]):
                    held.discard(part)
                    changed = True
        return frozenset(held)

    def _plain_class(self, name: str, trail: frozenset[str] = frozenset()) -> bool:
        """Is this a scanned class whose bases are all scanned plain classes or ones that can never be
        a module (`object`, `abc.ABC`)? (A base the index cannot find may be a module.)"""
        target = self.lookup(name)
        if target is None or target in trail or target not in self.bases:
            return False
        return all(never_module(base) or self._plain_class(base, trail | {target}) for base in self.bases[target])

    def unwrapped(self, class_name: str) -> str | None:
        """Why a class's findings are advice only, or None: the scanned files show what runs
        under DataParallel (see _classes_in_use) and no class of this simple name is part of it.
        Simple names keep this conservative: a same-named class that is used counts as this one."""
        used = self._derived("used", self._classes_in_use)
        if used is _UNKNOWN or class_name in used:
            return None
        names = sorted({n.rsplit(".", 1)[-1] for n in self._wrapped_roots})
        return f"no scanned file wraps `{class_name}` or builds it into a model they wrap (they wrap {_shown(names)})"

    def unreached(self, filename: str, class_name: str) -> str | None:
        """Why a class's findings are advice only, or None, from the wrap sites that can run its file
        (reach.ImportGraph): none does (a subproject of a monorepo that never wraps, an example
        beside the one that does, a vendored library no script runs), or every one that does shows
        what it wraps and no class of this simple name is part of it (a loss called on the gathered
        output, beside the model a script wraps). Not where the scanned files wrap nothing, or no
        wrap site is run by a file of the project (a library, whose users wrap its top-level
        classes); not where a site's reach is not known (ImportGraph.reach: a file on the way loads
        a module by a computed name or was not scanned, or imports a project file the run left out;
        a handed wrap no scanned file imports): it may run anything."""
        key = os.path.abspath(filename)
        if key not in self._file_imports or not self._wrap_sites:
            return None
        if self._site_reach is None:
            self._site_reach = self._wrap_site_reach()
        if not self._site_reach:
            return None
        sites = [site for site, reach in self._site_reach if reach is None or key in reach]
        if not sites:
            return "no file that wraps a model, or runs one that does, imports this module, directly or through others"
        roots: set[str] = set()
        for site in sites:
            if site not in self._site_uses:
                wrapped, alone, candidates, unresolved = self._wrap_sites[site]
                self._site_uses[site] = self._uses(wrapped, alone, set(wrapped) - alone, candidates, unresolved)
            site_used, site_roots = self._site_uses[site]
            if site_used is _UNKNOWN or class_name in site_used:
                return None
            roots.update(n.rsplit(".", 1)[-1] for n in site_roots)
        files = sorted(_relative(site) for site in sites)
        return (f"the files that wrap a model and run this module ({_shown(files, '')}) wrap {_shown(sorted(roots))} "
                f"and build no `{class_name}` into it")

    def latent_wrap(self, class_name: str) -> str | None:
        """Why a class's findings are latent (a warning), or None: every wrap site that runs it under
        DataParallel (the class wrapped, or one that builds it as a layer: see _uses) wraps it only as
        built behind a switch off by default (wrapping.latent_wraps; a switch its file does not decide counts where the
        project's option table shows it off, ``option_default``), and the sites that run by default
        show what they run (none, or classes of other simple names). Not where a site that runs by
        default was not traced to a class: it may run anything."""
        return self._derived("latent_wraps", self._latent_only_classes).get(class_name)

    def _latent_only_classes(self) -> dict[str, str]:
        latent = {name: sites for name, sites in list(self._latent_wraps.items()) if name not in self._live_wrapped
                  and all(any("=" not in gate or self.option_default(gate) for gate in site.split(","))
                          for site in sites)}
        if not latent:
            return {}
        live_names = (self._wrapped_names | self._item_wrapped()) - set(latent)
        alone = self._wrapped_alone - set(latent)
        live: frozenset[str] = frozenset()
        if live_names or self._wrap_candidates or self._unresolved_wraps:
            live = self._uses(live_names, alone, self._wrapped_not_alone, self._wrap_candidates,
                              self._unresolved_wraps)[0]
            if live is _UNKNOWN:
                return {}
        switches: dict[str, set[str]] = {}
        for name, sites in sorted(latent.items()):
            used = self._uses({name}, self._wrapped_alone, self._wrapped_not_alone, [], 0)[0]
            if used is _UNKNOWN:
                continue
            gates = {gate.partition("=")[0] for site in sites for gate in site.split(",")}
            for simple in used - live:
                switches.setdefault(simple, set()).update(gates)
        return {simple: f"it runs under DataParallel only with {_shown(sorted(gates))} changed from its default"
                for simple, gates in switches.items()}

    def unused_dataparallel(self) -> str | None:
        """Why every class's findings are advice only, or None: the scanned project trains its
        models itself (a file runs a training loop, FileResult.trains) and wraps nothing in
        DataParallel anywhere (no wrap site of any form: a subclass, the functional `data_parallel`, a
        builder that returns a wrapper, a file that mentions a wrap and does not parse; nor does it
        define a DataParallel subclass). It is an application that trains without DataParallel (on
        one device, or with DistributedDataParallel or a launcher of its own), not a class library
        whose users may wrap any model: "real if this class were the one wrapped" is not real when
        nothing wraps it. A tree with no training code of its own (a model zoo) keeps the library view."""
        if self._no_dataparallel is None:
            self._no_dataparallel = self._no_dataparallel_reason()
        return self._no_dataparallel or None

    def _no_dataparallel_reason(self) -> str:
        if not self._training_files or self._wraps_anything() or self._imports_library_trainer():
            return ""
        files = sorted(_relative(f) for f in self._training_files)
        return (f"the scanned project trains its models itself ({_shown(files, '')}) and wraps none in DataParallel "
                "anywhere: an application that does not use DataParallel")

    def _wraps_anything(self) -> bool:
        """Does any indexed file wrap a model in DataParallel, in any form (torch's `replicate` by hand
        too), or define a subclass of it?"""
        # (A builder counts where it returns a wrapper: a function returning what an imported
        # function returns is one only if that function is, `builder:` conditions.)
        return bool(self._wrap_sites or self._replicates or self._wrapped_names or self._wrap_candidates
                    or self._unresolved_wraps or self._own_attributes or self._replaced_output
                    or self._wrappers or self._parallel_helpers or self._wrapped_attributes or self._init_wrapped
                    or self._method_wraps or self._handed) or any(map(self.returns_wrapper, list(self.builders)))

    def _imports_library_trainer(self) -> bool:
        """Does an indexed file import a library trainer that may wrap in DataParallel itself
        (``TRAINER_NAME_PACKAGES``' `...Trainer`, anything of ``TRAINER_PACKAGES``)?"""
        if any(name.replace(":", ".").partition(".")[0] in TRAINER_PACKAGES
               for names in list(self._imports.values()) for name in names):
            return True
        return any(target.partition(".")[0] in TRAINER_NAME_PACKAGES and target.endswith("Trainer")
                   for target in list(self._import_targets))

    def _wrap_site_reach(self) -> list[tuple[str, frozenset[str] | None]]:
        """Each wrap site that some file runs, with the files it reaches (reach.ImportGraph; None: not
        known)."""
        graph = ImportGraph(self._file_imports, self._opaque_files, self._files_named, frozenset(self._training_files),
                            self._classes_of_file)
        found = []
        for site in self._wrap_sites:
            runners = graph.runners(site, site in self._handed_sites)
            if runners is None:
                continue
            # A site that wraps what it is handed, which no scanned file imports: its callers were left
            # out of the run (a subset without `tools/train.py`), and may hand it any model.
            found.append((site, None if runners == {site} and site in self._handed_sites else graph.reach(runners)))
        return found

    def _files_named(self, name: str) -> set[str]:
        """The files of the indexed modules an import name may stand for (_imported_modules)."""
        return {f for module in self._imported_modules([name]) for f in self._files_of_module.get(module, ())}

    def _imported_modules(self, names: list[str]) -> set[str]:
        """The indexed modules some import names stand for: the module itself and the packages
        above it, and, where the scan's roots differ from the script's `sys.path`, every module
        whose dotted name ends with it (`from models import resnet` run from `tools/`, with
        `lib/models/resnet.py` scanned as `lib.models.resnet`) or that it ends with (a folder
        without `__init__.py`: `synthesizer.models.tacotron` scanned as `models.tacotron`).
        Generous: a module wrongly taken for imported keeps findings, one wrongly left out would
        drop them."""
        found: set[str] = set()
        for name in names:
            name = name.replace(":", ".").lstrip(".")
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in self._imports:
                    found.add(prefix)
            found |= self._modules_matching(name)
        return found

    def _modules_matching(self, name: str) -> set[str]:
        """The indexed modules named ``name``, or whose name ends with it, or that it ends with."""
        return {module for module in self._modules_by_leaf.get(name.rpartition(".")[2], ())
                if module == name or module.endswith("." + name) or name.endswith("." + module)}

    def offline(self, class_name: str) -> str | None:
        """Why a class's findings are advice only, or None: every scanned class of this simple name
        is left out of its file's `__all__` and unused there (an offline utility, a leftover), and
        no scanned file imports, wraps, builds or subclasses it. Nothing runs its code."""
        if class_name not in self._derived("offline", self._offline_names):
            return None
        return f"`{class_name}` is left out of its file's `__all__` and no scanned file uses it"

    def unnamed(self, class_name: str) -> str | None:
        """Why a class's findings are advice only, or None: the scanned files wrap a model (a
        model file checked alone is not asked), none of them looks classes up by a computed name,
        and no scanned file names this class: its own file never uses it, no file imports,
        mentions or subclasses it, and its bases are torch's (a project base may register its
        subclasses). Nothing the project runs can build it (see dpcheck.analysis.mentions)."""
        if class_name not in self._derived("never_named", self._never_named_classes):
            return None
        return f"no scanned file names `{class_name}`: nothing builds, wraps or imports it"

    def unbuilt(self, filename: str, class_name: str) -> str | None:
        """Why a class's findings are advice only, or None: the scanned files wrap a model, none looks
        classes up by a computed name, and nothing they run can build this class: no file names it
        other than in an import, a literal `__all__`, a type test or the body of a module class that
        is itself never built (StyleTTS2's `XDiffusion` picks `VDiffusion` from a list); no module class
        that is built makes it a layer (a class of the same name in another file, devlbert.py's
        `Causal_v` beside devlbert2.py's, is another class); nothing subclasses it. Unlike ``unnamed``,
        an import or `__all__` does not count: importing a class builds nothing. Asked whatever the
        wrap sites' use-sets are: a site that wraps what it was handed can hand on only what
        something builds (a model unpickled whole with `torch.load` builds in no file: not seen)."""
        record = self._file_imports.get(os.path.abspath(filename))
        if record is None or f"{record[0]}.{class_name}" not in self._derived("unbuilt", self._unbuilt_classes):
            return None
        return (f"no scanned file builds `{class_name}`: it is named only in imports, `__all__`, type tests "
                "or the code of module classes nothing builds")

    def _unbuilt_classes(self) -> frozenset[str]:
        if self._builds_by_name or not (self._wrapped_names or self._unresolved_wraps or self._wrap_candidates):
            return frozenset()
        # The simple names any file may build by: a mention outside a module class's body (a call, a
        # value handed on or returned, a string a registry reads, a word of a file read as text), a bare
        # construction, a base of a class (a subclass may be built), what is wrapped.
        named = self._escaping | self._mentions | set(self._bare_built)
        named.update(base.rsplit(".", 1)[-1] for bases in list(self.bases.values()) for base in bases)
        named.update(name.rsplit(".", 1)[-1] for name in self._wrapped_names)
        named.update(leaf.rsplit(".", 1)[-1] for leaves in self._wrap_candidates for leaf in leaves)
        by_simple: dict[str, list[str]] = {}
        for qualname in list(self.bases):
            simple = qualname.rsplit(".", 1)[-1]
            # (A name with a lower-case initial is not in the mentions: `pkg.losses.bicubic()` would not show.)
            if simple not in named and capitalised(simple) and _tail(qualname) in self._scanned:
                by_simple.setdefault(simple, []).append(qualname)
        for simple in self._looked_up(set(by_simple)):
            del by_simple[simple]
        if not by_simple:
            return frozenset()
        # Each candidate's owners: the module classes (simple names) whose code builds it as a layer,
        # as their file resolves it (another file's class of the same name is not it), or names it.
        owners: dict[str, set[str]] = {}
        for owner, parts in list(self._layers_of.items()):
            for part in parts:
                same = by_simple.get(part.rsplit(".", 1)[-1])
                if not same:
                    continue
                target = self.lookup(part)
                for qualname in same:
                    if target is None or _tail(target) == _tail(qualname):
                        owners.setdefault(qualname, set()).add(owner)
        for simple, names in self._mentioned_in.items():
            for qualname in by_simple.get(simple, ()):
                owners.setdefault(qualname, set()).update(names)
        unbuilt = {qualname for same in by_simple.values() for qualname in same}
        all_of: dict[str, list[str]] = {}
        for qualname in list(self.bases):
            all_of.setdefault(qualname.rsplit(".", 1)[-1], []).append(qualname)
        changed = True
        while changed:  # (a class some built module class builds or names may be built)
            changed = False
            for qualname in sorted(unbuilt):
                if any(not all(q in unbuilt for q in all_of.get(owner, [owner])) for owner in owners.get(qualname, ())):
                    unbuilt.discard(qualname)
                    changed = True
        return frozenset(unbuilt)

    def called_bare(self, class_name: str) -> str | None:
        """Why a class's findings are advice only, or None: the scanned files wrap a model, none
        looks classes up by a computed name, and every instance of the class the project builds is
        built outside any module and only called there (on what the wrapped model returned),
        never handed to a wrapper, a module or anything else; or the class is a layer only of
        such classes (or of classes no file names). No replica runs its forward (see
        dpcheck.analysis.bare_calls)."""
        return self._derived("bare", self._bare_classes).get(class_name)

    def _bare_classes(self) -> dict[str, str]:
        if not self._bare_built or self._builds_by_name or not (
                self._wrapped_names or self._unresolved_wraps or self._wrap_candidates):
            return {}
        # Not bare: a base of any class (a subclass may be wrapped), a class wrapped or a wrap
        # candidate, a class named in any other way.
        excluded = self._escaping.union(self._mentioned_in)
        excluded.update(base.rsplit(".", 1)[-1] for bases in list(self.bases.values()) for base in bases)
        excluded.update(name.rsplit(".", 1)[-1] for name in self._wrapped_names)
        excluded.update(leaf.rsplit(".", 1)[-1] for leaves in self._wrap_candidates for leaf in leaves)
        owners_of: dict[str, set[str]] = {}
        for owner, parts in self._layers_of.items():
            for part in parts:
                owners_of.setdefault(part.rsplit(".", 1)[-1], set()).add(owner)
        excluded.update(self._looked_up(set(self._bare_built).union(owners_of)))  # a lookup by name may build it
        bare: dict[str, str] = {}
        for name, bindings in self._bare_built.items():
            if name not in excluded and name not in owners_of and all(map(self._binding_confined, bindings)):
                bare[name] = (f"`{name}` is built outside any module and only called there (on what the "
                              "wrapped model returns), never handed to a wrapper or a module: no replica runs it")
        changed = bool(bare)
        while changed:  # the layers only such classes (or classes no file names) build
            changed = False
            for part, owners in owners_of.items():
                if part in bare or part in excluded or not all(map(self._binding_confined, self._bare_built.get(
                        part, ()))) or not all(owner in bare or self.unnamed(owner) for owner in owners):
                    continue
                shown = ", ".join(f"`{owner}`" for owner in sorted(owners))
                bare[part] = f"`{part}` is built only as a layer of {shown}, which no replica runs"
                changed = True
        return bare

    def _binding_confined(self, binding: str, trail: frozenset[str] = frozenset()) -> bool:
        """A local ("") is; `<attr>:<holder>` where no file reads `.<attr>` other than confined and
        no class that may be a module inherits the holder (its forward could call `self.<attr>`);
        `()<function>` where every scanned call of a function of that name binds its result so (a
        file that calls it otherwise, or is read as text, says no)."""
        if not binding:
            return True
        if binding.startswith(RETURNED):
            function = binding[len(RETURNED):]
            if function in self._result_escapes or function not in self._result_bindings or binding in trail:
                return False
            return all(self._binding_confined(bound, trail | {binding}) for bound in self._result_bindings[function])
        attr, _, holder = binding.partition(":")
        if attr in self._passed_attributes:
            return False
        return not any(self._inherits(qualname, holder) and self.is_module(qualname) for qualname in list(self.bases))

    def _inherits(self, qualname: str, holder: str, trail: frozenset[str] = frozenset()) -> bool:
        if qualname == holder:
            return True
        if qualname in trail:
            return False
        for base in self.bases.get(qualname, ()):
            target = self.lookup(base)
            if target is not None and self._inherits(target, holder, trail | {qualname}):
                return True
        return False

    def _never_named_classes(self) -> frozenset[str]:
        if not self._unnamed or self._builds_by_name or not (
                self._wrapped_names or self._unresolved_wraps or self._wrap_candidates):
            return frozenset()
        looked_up = self._looked_up({q.rsplit(".", 1)[-1] for q in self._unnamed})
        return self._used_nowhere(self._unnamed, self._mentions | looked_up, lambda qualname: all(
            b in MODULE_BASES or is_torch_nn_class(b) for b in self.bases[qualname]))

    def _looked_up(self, simple_names: set[str]) -> set[str]:
        """Which of these simple class names a lookup by a computed name in a scanned file may reach
        (mentions.lookup_namespaces): a namespace module binds the name (defines it, imports it, or a
        star import does), or the namespace is a module of the project that was not scanned, whose
        names are not known. A namespace outside the project (a library's `models`) holds none of them."""
        if not self._lookup_namespaces or not simple_names:
            return set()
        reached: set[str] = set()
        for module in sorted(self._lookup_namespaces):
            if module not in self._loaded and (self._modules_by_leaf.get(module.rpartition(".")[2]) or any(
                    loaded.startswith(module + ".") for loaded in list(self._loaded))):
                return set(simple_names)  # a project module not scanned (or scanned from another root)
            reached.update(simple for simple in simple_names if self.lookup(f"{module}.{simple}") is not None)
        return reached

    def _offline_names(self) -> frozenset[str]:
        if not self._unused:
            return frozenset()
        return self._used_nowhere(self._unused, frozenset(), lambda qualname: True)

    def _used_nowhere(self, unused: set[str], mentioned, eligible) -> frozenset[str]:
        """Simple names of the classes in ``unused`` (each unused in its own file) that no scanned
        file imports, wraps, builds as a layer, subclasses or (``mentioned``) names, every scanned
        class of that simple name being one of them and ``eligible``."""
        candidates = {q.rsplit(".", 1)[-1] for q in unused}.difference(mentioned)
        same: dict[str, list[str]] = {}
        for qualname in list(self.bases):
            simple = qualname.rsplit(".", 1)[-1]
            if simple in candidates:
                same.setdefault(simple, []).append(qualname)
        used = set(map(_tail, self._import_targets))  # `module.Class` tails
        used.update(_tail(self.lookup(n) or n) for n in [*self._wrapped_names, *self._submodule_names])
        base_names = {base.rsplit(".", 1)[-1] for bases in list(self.bases.values()) for base in bases}
        return frozenset(simple for simple, qualnames in same.items()
                         if simple not in base_names and all(q in unused and _tail(q) not in used and eligible(q)
                                                             for q in qualnames))

    def _classes_in_use(self) -> frozenset[str]:
        """Simple names of the classes the scanned files wrap, their layers and bases (see _uses);
        `_wrapped_roots` keeps what they wrap."""
        used, self._wrapped_roots = self._uses(self._wrapped_names, self._wrapped_alone, self._wrapped_not_alone,
                                               self._wrap_candidates, self._unresolved_wraps)
        return used

    def _uses(self, wrapped_names, alone: set[str], not_alone: set[str], candidates: list[list[str]],
              unresolved: int) -> tuple[frozenset[str], list[str]]:
        """(Simple names of the classes wrapped, their layers (a class built inside one in use, or
        handed to a wrapped class's constructor), and bases of any of these; what is wrapped), for
        the wrap facts of some files: ``_UNKNOWN`` when they do not show what runs under
        DataParallel: they wrap nothing, a wrap site was not traced to a class, or a wrapped class was
        not scanned (a library model, a file left out), which may build any class as a layer. A wrap
        site through a builder of another file or a registry counts its candidate classes
        (wrapping.wrap_candidates), and the classes built as their parts; one whose candidates are
        not all traced counts as a site not traced. A class built only as a layer of classes not in
        use (CRD's memory bank, the criterion built bare) is not in use either."""
        wrapped: list[str] = []
        parts: list[str] = []
        library: list[str] = []
        # (lookup may summarise unscanned modules, which adds names: iterate over a copy)
        for name in list(wrapped_names):
            target = self.lookup(name)
            if target is not None:
                wrapped.append(target)  # (under its own name: `Model = DetectionModel` wraps `DetectionModel`)
                continue
            if name in alone and name not in not_alone and self._library_class(name):
                # torchaudio's `DataParallel(WaveRNN(n_hidden=...))`: the library's code runs, handed
                # nothing of the project's.
                library.append(name)
                continue
            # A wrapped name that is no class: a builder of another file called at the wrap site
            # (SCAN's `DataParallel(get_model(p))`) stands for the classes its returns build; a
            # builder whose returns are not all traced leaves what runs unknown.
            settled = self._settle_leaves([CALL_LEAF + name])
            if settled is None:
                return _UNKNOWN, []
            wrapped += settled[0]
            parts += settled[1]
        # Torch layers wrapped in place (`nn.DataParallel(nn.Linear(8, 2))`), which no file records as wrapped.
        library += [name for name in sorted(alone - set(wrapped_names)) if self._library_class(name)]
        for leaves in list(candidates):
            settled = self._settle_leaves(leaves)
            if settled is None:
                return _UNKNOWN, []
            wrapped += settled[0]
            parts += settled[1]
        if unresolved or not (wrapped or library) or not all(
                _tail(self.lookup(name) or "") in self._scanned for name in wrapped):
            return _UNKNOWN, []
        if any((self.lookup(name) or name).rpartition(".")[0] in self._by_name_modules for name in wrapped):
            # The module of a class wrapped looks classes up by a computed name (yolov5's `eval(m)` of
            # the layer names a configuration gives): the layers it builds are not all read off names.
            return _UNKNOWN, []
        used: set[str] = set()
        pending = wrapped + parts
        while pending:
            name = pending.pop()
            simple = name.rsplit(".", 1)[-1]
            if simple in used:
                continue
            used.add(simple)
            target = self.lookup(name)
            pending.extend(self.bases.get(target, ()) if target else ())
            pending.extend(self._layers_of.get(simple, ()))
        return frozenset(used), wrapped + library

    def _settle_leaves(self, leaves: list[str], trail: frozenset[str] = frozenset(),
                       part: bool = False) -> tuple[list[str], list[str]] | None:
        """(the classes, the classes of parts) that ``wrapping.instance_leaves`` leaves stand for:
        each class, and for each call of a function of another module the leaves of that
        function's returns (followed through re-exports, summarising an unscanned module); None
        when a function's returns are not all traced (a library function, a module not found, a
        recursion). A part's classes are all parts."""
        classes: list[str] = []
        parts: list[str] = []
        for leaf in leaves:
            is_part = part or leaf.startswith(PART_LEAF)
            leaf = leaf.removeprefix(PART_LEAF)
            if leaf.startswith(ITEMS_LEAF):
                stored = self._stored_items(leaf[len(ITEMS_LEAF):])
                found = None if not stored or UNTRACED_ITEM in stored or leaf in trail \
                    else self._settle_leaves(stored, trail | {leaf}, is_part)
                if found is None:
                    return None
                classes += found[0]
                parts += found[1]
                continue
            if leaf.startswith(MODULES_LEAF):
                found = self._package_leaves(leaf[len(MODULES_LEAF):], trail, is_part)
                if found is None:
                    return None
                classes += found[0]
                parts += found[1]
                continue
            if leaf.startswith(OVERRIDE_LEAF):
                found = None if leaf in trail else self._override_leaves(leaf[len(OVERRIDE_LEAF):], trail | {leaf},
                                                                         is_part)
                if found is None:
                    return None
                classes += found[0]
                parts += found[1]
                continue
            if leaf.startswith(HANDED_LEAF):
                found = None if leaf in trail else self._handed_values(leaf[len(HANDED_LEAF):], trail | {leaf}, is_part)
                if found is None:
                    return None
                classes += found[0]
                parts += found[1]
                continue
            if not leaf.startswith(CALL_LEAF):
                (parts if is_part else classes).append(leaf)
                continue
            name = leaf[len(CALL_LEAF):]
            # (`models.get_backbone_class()`: a call of the class the function returns; the function's
            # name is what re-exports forward)
            called = CALLED_RETURN if name.endswith(CALLED_RETURN) else ""
            name = self._function(name.removesuffix(CALLED_RETURN), self._returns, called) + called
            if name not in self._returns and not called and self.lookup(leaf[len(CALL_LEAF):]) is not None:
                # A lower-case class of another file (MEAL-V2's `discriminatorLoss(d)`).
                (parts if is_part else classes).append(leaf[len(CALL_LEAF):])
                continue
            if name not in self._returns or name in trail:
                return None
            found = self._settle_leaves(self._returns[name], trail | {name}, is_part)
            if found is None:
                return None
            classes += found[0]
            parts += found[1]
        return classes, parts

    def _package_leaves(self, text: str, trail: frozenset[str], part: bool) -> tuple[list[str], list[str]] | None:
        """``_settle_leaves`` of `<package>.<name>` (wrapping.MODULES_LEAF): what calling ``name`` of any
        scanned module of the package builds (its class, or its function's returns), over the modules
        that define it; None where one defines it as a function whose returns are not traced, or none
        does. A package of the same last parts scanned from another root counts too (generous)."""
        package, _, name = text.rpartition(".")
        found: tuple[list[str], list[str]] = ([], [])
        any_defines = False
        for module in list(self._imports):
            parent = module.rpartition(".")[0]
            if parent != package and not parent.endswith("." + package):
                continue
            qualified = f"{module}.{name}"
            if qualified in self._untraced_functions:
                return None
            if qualified in self._returns:
                leaves = self._settle_leaves([CALL_LEAF + qualified], trail, part)
            elif qualified in self.bases:
                leaves = ([], [qualified]) if part else ([qualified], [])
            else:
                continue
            if leaves is None:
                return None
            any_defines = True
            found[0].extend(leaves[0])
            found[1].extend(leaves[1])
        return found if any_defines else None

    def _override_leaves(self, text: str, trail: frozenset[str], part: bool) -> tuple[list[str], list[str]] | None:
        """``_settle_leaves`` of `<Class>.<method>` (wrapping.OVERRIDE_LEAF): what the method returns in
        the class and in every scanned subclass that defines it; None where one of them is not traced,
        or where none returns anything."""
        holder, _, method = text.rpartition(".")
        leaves: list[str] = []
        for key, returned in list(self._method_returns.items()):
            owner, _, name = key.rpartition(".")
            if name != method or not self._inherits(owner, holder):
                continue
            if UNTRACED_ITEM in returned:
                return None
            leaves += returned
        return self._settle_leaves(leaves, trail, part) if leaves else None

    def _handed_values(self, text: str, trail: frozenset[str], part: bool) -> tuple[list[str], list[str]] | None:
        """``_settle_leaves`` of what every scanned call of a function or class hands its parameter
        (`<callee>@<parameter>#<position>[=None]`, wrapping.HANDED_LEAF); None where a call's value is
        not traced, passes `*args` it may come in, or leaves it to a default other than None, where no
        scanned file calls the callee, or where some call of it may not be recorded (``_calls_of``)."""
        callee, _, parameter = text.rpartition("@")
        parameter, _, default = parameter.partition("=")
        parameter, _, position = parameter.partition("#")
        calls = self._calls_of(callee)
        if not calls:
            return None
        leaves: list[str] = []
        for passed in calls:
            arguments = dict(p.partition("=")[::2] for p in passed if p != PASSED_ON)
            value = arguments.get(position, arguments.get(parameter))
            if value is None:
                if PASSED_ON in passed or default != "None":
                    return None
                continue
            if value == UNTRACED:
                return None
            leaves += filter(None, value.split(","))
        return self._settle_leaves(leaves, trail, part)

    def _calls_of(self, callee: str) -> list[list[str]] | None:
        """The recorded calls of a function or class (each call's arguments, handed.handed_calls), a
        class's own and those of its subclasses that do not define `__init__` (they run its
        constructor); None where a call may not be recorded: a file that records no calls calls a
        function of that simple name, a recording file uses the name otherwise, or a subclass is in a
        file that records no calls. Names match as ``handed_wrapper`` matches them (generous: a call
        of another callee taken for this one only adds values)."""
        target = self.lookup(callee)
        callees = {callee}
        if target is not None:
            for qualname in list(self.bases):
                if qualname == target or not self._inherits(qualname, target):
                    continue
                if qualname.rpartition(".")[0] not in self._recorded_modules:
                    return None  # (its `super().__init__(...)` is not recorded)
                if qualname not in self._own_inits:
                    callees.add(qualname)
        if any(name.rpartition(".")[2] in self._called_unrecorded for name in callees):
            return None
        wanted = {_tail(name) for name in callees} | {_tail(self.lookup(name) or name) for name in callees}
        calls: list[list[str]] = []
        for name, recorded in list(self._handed_calls.items()):
            resolved = name
            for _ in range(8):  # (re-exports: `from .trainer import Trainer` in a package `__init__`)
                if _tail(resolved) in wanted or resolved not in self.aliases:
                    break
                resolved = self.aliases[resolved]
            if _tail(resolved) not in wanted:
                continue
            if [USED_OTHERWISE] in recorded:
                return None
            calls += recorded
        return calls

    def _stored_items(self, key: str) -> list[str]:
        """The leaves of what a class (`<attr>@<class>`) and every scanned class that inherits from it
        put into `self.<attr>` item by item (wrapping.item_stores)."""
        attr, _, holder = key.partition("@")
        return [leaf for stored, leaves in list(self._item_stores.items()) if stored.partition("@")[0] == attr
                and self._inherits(stored.partition("@")[2], holder) for leaf in leaves]

    def _item_wrapped(self) -> set[str]:
        """Classes wrapped as items of a container on self that a base class wraps item by item
        (wrapping.ITEMS_LEAF candidates): those stored by name, even where another item is not traced."""
        return {leaf for leaves in list(self._wrap_candidates) for candidate in leaves
                if candidate.startswith(ITEMS_LEAF) for leaf in self._stored_items(candidate[len(ITEMS_LEAF):])
                if leaf != UNTRACED_ITEM and not leaf.startswith((CALL_LEAF, PART_LEAF))}

    def unplaced(self, name: str) -> bool:
        """Does no scanned class of this name move itself in its constructor, and no scanned function
        of this name return its module moved (placement)? A function is matched by its `module.name`
        tail too: a folder without `__init__.py` roots its modules differently from the imports."""
        target = self.lookup(name) or name
        if target in self._self_placing:
            return False
        tail = _tail(target)
        return not any(_tail(placed) == tail for placed in self._self_placing)

    def holds_weights(self, name: str, trail: frozenset[str] = frozenset()) -> bool:
        """May the class hold a parameter, buffer or weighted layer of its own: its constructor, a
        base's, or a class built there may build one, or one of them is not scanned?"""
        if name in MODULE_BASES or (is_torch_nn_class(name) and (
                parameter_free(name) or name.rsplit(".", 1)[-1] in MODULE_CONTAINERS)):
            return False
        target = self.lookup(name)
        if target is None or target in trail or target not in self._weightless:
            return True
        trail = trail | {target}
        return any(self.holds_weights(other, trail) for other in (*self.bases[target], *self._weightless[target]))

    def outlives_call(self, name: str) -> bool:
        """May an instance of this class outlive one forward call? False only when scanned code
        builds a class of its simple name inside forward-reachable code and nowhere else (not in an
        `__init__`, a function, a script or at module scope): each call, on each replica's thread
        and device, builds its own instance (see wrapping.summarize_construction)."""
        simple = name.rsplit(".", 1)[-1]
        return simple not in self._built_per_call or simple in self._built_elsewhere \
            or any(n.rsplit(".", 1)[-1] == simple for n in self._wrapped_names)

    def built_outside(self, name: str) -> bool:
        """``<module>.<Class>``: may a scanned file other than the class's own build it, so that its
        constructor options are not all read from that file's constructions? True where the module
        is not indexed, where another module imports the class (by its `module.Class` tail or a
        re-export) or its module (`import pkg.layers as layers; layers.AR(...)`), or builds a class
        of that simple name that it neither defines nor imports by name (a star import may bind it).
        A registry or a string lookup elsewhere is not seen."""
        module, _, simple = name.rpartition(".")
        if module not in self._loaded:
            return True
        if self._built_unresolved.get(simple, set()) - {module}:
            return True
        tail, leaf = _tail(name), module.rpartition(".")[2]
        # ``aliases``: "<importing module>.<local name>" -> target, for every scanned file (a rare
        # question: read when asked rather than indexed by target).
        return any(local.rpartition(".")[0] != module and (
            _tail(target) == tail or self.lookup(target) == name or target == module or target.endswith("." + module))
            for local, target in list(self.aliases.items()) if target.rpartition(".")[2] in (simple, leaf))

    def batch_dim_is_zero(self, name: str) -> bool:
        """Does no scanned file wrap this class with `DataParallel(..., dim=k)`, k not 0?"""
        return not any(self.lookup(wrapped) == name or wrapped == name for wrapped in self._wrapped_dims)

    def passed(self, text: str, trail: frozenset[str] = frozenset()) -> bool:
        """``<class>:<param>@<k>``: does some call of the class's modules in the scanned files pass
        forward's parameter (by keyword, or as positional argument k), or is a caller not known
        (none seen, a use other than a call, a subclass that may call it)? A call that forwards an
        optional parameter of its own forward (guards.module_calls) passes it where that parameter
        is passed, asked the same way. A wrapped class's callers are the calls through its wrappers
        (guards.wrapper_calls), read only where every wrap site of the scanned files is traced to its
        class and read (else they are not known)."""
        if text in trail:
            return False  # a cycle of forwarding: what enters it from outside is asked elsewhere
        trail = trail | {text}
        name, _, rest = text.rpartition(":")
        param, _, position = rest.partition("@")
        # A parameter that defaults to False: a caller passing the constant False passes nothing new.
        false_default = position.endswith(FALSE_PASSED)
        position = position.removesuffix(FALSE_PASSED)
        if len(trail) > 1:
            name = self.lookup(name) or name  # a forwarding caller, named as its own file names it
            if name in self._derived("unbuilt", self._unbuilt_classes):
                return False  # nothing builds it (ClassIndex.unbuilt): its forward forwards nothing
        if self._calls_canonical is None:
            canonical: dict[str, set[str]] = {}
            for callee, markers in list(self._module_calls.items()):
                canonical.setdefault(self.lookup(callee) or callee, set()).update(markers)
            self._calls_canonical = canonical
        markers = self._calls_canonical.get(name)
        if not markers or UNKNOWN_CALLER in markers:
            return True
        simple = name.rsplit(".", 1)[-1]  # (by simple name: cheap, and a same-named base counts)
        if any(base.rsplit(".", 1)[-1] == simple for bases in self.bases.values() for base in bases):
            return True
        if self.wrapped(name) and self._wrapper_call_passes(name, param, position, trail):
            return True
        most = max((int(m[1:]) for m in markers if m.startswith("#")), default=0)
        if param in markers or 0 <= int(position) < most or f"@{position}" in markers:
            return True
        if not false_default and (param + FALSE_PASSED in markers or f"@{position}{FALSE_PASSED}" in markers):
            return True  # (False is a value where the default is None: `if mask is not None:` takes it)
        return any(self.passed(source, trail) for marker in markers
                   for head, _, source in [marker.partition("<")] if source and head in (param, f"@{position}"))

    def _wrapper_call_passes(self, name: str, param: str, position: str, trail: frozenset[str]) -> bool:
        """May some call through a DataParallel wrapper of the class pass forward's parameter? True
        unless every wrap site of the scanned files is traced to its class and its calls are read."""
        if any(entry == UNKNOWN_CALLER or self.condition(entry) for entry in self._wrapper_calls.get(UNKNOWN_CALLER, ())) \
                or self._wrap_candidates or self._unresolved_wraps \
                or any(self.lookup(n) is None for n in list(self._wrapped_names)):
            return True
        calls = [call for callee, found in list(self._wrapper_calls.items())
                 if callee != UNKNOWN_CALLER and (self.lookup(callee) or callee) == name for call in found]
        if not calls:
            return True
        for call in calls:
            if call == UNKNOWN_CALLER:
                return True
            count, *keywords = call.split(",")
            if param in keywords or 0 <= int(position) < int(count[1:]) and f"-{position}" not in keywords \
                    and not any(k.startswith(f"-{position}<") for k in keywords):
                return True
            if any(self.passed(source, trail) for keyword in keywords
                   for head, _, source in [keyword.partition("<")] if source and head in (param, f"-{position}")):
                return True
        return False

    def wrapper_passes(self, text: str) -> bool:
        """``<class>:<param>@<k>``: does some call of a DataParallel wrapper of the class in the
        scanned files pass forward's parameter (by keyword, or as positional argument k)? Then the
        code behind `if <param> is not None:` runs when the model is wrapped (see guards.wrapper_calls).
        An argument that forwards the caller's own optional parameter counts as passed."""
        name, _, rest = text.rpartition(":")
        param, _, position = rest.partition("@")
        for callee, calls in list(self._wrapper_calls.items()):
            if callee == UNKNOWN_CALLER or (self.lookup(callee) or callee) != name:
                continue
            for call in calls:
                count, *keywords = call.split(",")
                names = {k.partition("<")[0] for k in keywords}
                if call != UNKNOWN_CALLER and (param in names or 0 <= int(position) < int(count[1:])
                                               and f"-{position}" not in keywords):
                    return True
        return False

    def returns_scalar(self, text: str) -> bool:
        """``<class>:<passed>``: does the class's forward return a 0-dim value when called passing
        ``passed`` (see outputs.scalar_call)? ``<class>[k]:<passed>``: in element k of its tuples?"""
        name, _, passed = text.rpartition(":")
        name, bracket, element = name.partition("[")  # `<class>[k]`: element k of the tuples it returns
        tokens = self._scalar_forwards.get((self.lookup(name) or name) + bracket + element)
        return tokens is not None and scalar_call(tokens, passed)

    def scalar_function(self, name: str) -> bool:
        """Is every return of the function ``name`` 0-dim (outputs.scalar_functions)? The module that
        defines it is summarised when it was not scanned; a name another module re-exports is followed."""
        return self._function(name, self._scalar_functions) in self._scalar_functions

    def non_tensor_forward(self, name: str) -> bool:
        """Does every return of the class's forward hand back a value gather cannot take apart
        (outputs.non_tensor_forwards)?"""
        return (self.lookup(name) or name) in self._non_tensor_forwards

    def _function(self, name: str, known, suffix: str = "") -> str:
        """The function ``name`` names, as ``known`` (a summary of functions, keyed by the name and
        ``suffix``) holds it: re-exports followed, the module that should define it summarised when
        it was not scanned."""
        for _ in range(8):
            if name + suffix not in known and name not in self.aliases:
                self._load_for(name)
            if name + suffix in known or name not in self.aliases:
                break
            name = self.aliases[name]
        return name

    def unresumed(self, text: str) -> bool:
        """``<package>`` or ``<package>:<Class>`` (the class the saved wrapper holds): do the scanned
        files of the package (the scripts beside a save) not show that every checkpoint they load
        reads the wrapper's keys: none loads one as it is into a wrapper, nor (for ``Class``) into a
        model of that class with the prefix taken off, or one loads one as it is into anything else
        (checkpoints.summarize_checkpoint_loads)?"""
        package, _, built = text.partition(":")
        loads = self._checkpoint_loads.get(package, ())
        if BARE_LOAD in loads:
            return True
        return WRAPPED_LOAD not in loads and not (built and f"{STRIPPED_LOAD}:{built}" in loads)

    def keeps_partial_batches(self, name: str = "") -> bool:
        """May a partial last batch reach a wrapped model in training? False when every scanned file
        that wraps a model passes `drop_last=True` to its loader or only evaluates what it wraps
        (scripts.partial_batches). Project-wide, since a
        script's wrap is often not traced to a class (a registry, a builder) and its loader is what
        decides; but where every wrap site of the project is traced and ``name`` is a class some files
        wrap, only those files' loaders decide (dgcnn's main_cls.py drops the last batch of the
        PointNet it wraps, while main_partseg.py keeps it for another model)."""
        if self._wrapping_files == 0:
            return True
        target = self.lookup(name) or name
        if self._unresolved_wraps or target not in self._wrapped_keeps_last or any(
                any(leaf.startswith(HANDED_LEAF) for leaf in leaves) and self._settle_leaves(leaves) is None
                for leaves in list(self._wrap_candidates)):
            return self._keeps_last  # (a wrap of what callers hand over that no scanned call settles: any class)
        # A file that keeps the last batch and wraps what a builder of an unscanned module returns
        # (`nn.DataParallel(build(cfg))`) may wrap this class too.
        if any(keeps and self.lookup(wrapped) is None for wrapped, keeps in self._wrapped_keeps_last.items()):
            return self._keeps_last
        return self._wrapped_keeps_last[target]

    def may_evaluate(self) -> bool:
        """May a wrapped model of the scanned program run in eval mode? False only where the scanned
        files wrap a model, none imports a library trainer (which evaluates what it is handed), and no
        file that may switch a model to eval mode (scripts.switches_to_eval) runs in a process that
        wraps one: modules start in training mode, and a test script that builds its model bare and no
        wrapping script imports (reach.ImportGraph, as ``unreached`` reads the wrap sites) evaluates
        only that bare model. A project that wraps nothing is a library (or its wrap is elsewhere),
        whose users evaluate."""
        if not self._wraps_anything() or self._imports_library_trainer():
            return True
        return bool(self._evaluating_files) and self._evaluates_where_wrapped()

    def _evaluates_where_wrapped(self) -> bool:
        """Is some evaluating file among the files a live wrap site's runners load (or is that not
        known: a site's reach unknown, no wrap site read, a file not indexed)?"""
        if not self._wrap_sites or any(f not in self._file_imports for f in self._evaluating_files):
            return True
        if self._site_reach is None:
            self._site_reach = self._wrap_site_reach()
        if not self._site_reach:
            return True
        return any(reach is None or not reach.isdisjoint(self._evaluating_files) for _, reach in self._site_reach)

    def feeds_partial_batches(self, name: str, trail: frozenset[str] = frozenset()) -> bool:
        """May a call of the function or method ``name`` get a batch from a loader that keeps the
        partial last batch? False where the scanned files call it, and every call is fed by loaders
        of its file that drop it, or runs once per call of a function around it (in its body, in no
        loop) of which the same holds (batch_feeds)."""
        markers = self._batch_feeds.get(name)
        if not markers or name in self._called or name in trail:
            return True
        return any(marker != DROPPED and self.feeds_partial_batches(marker.removeprefix(CALLED_IN), trail | {name})
                   for marker in markers)

    def keeps_module(self, text: str) -> bool:
        """``<class>:<argument>``, the argument a keyword name or `@k` (positional k): does the class
        keep what a call passes there as a submodule it calls (wrapping.kept_modules)? Unknown (a
        class not scanned, a `*args` call) is False: the finding needs it shown."""
        name, _, passed = text.rpartition(":")
        markers = self._kept_modules.get(self.lookup(name) or name, ())
        if passed.startswith("@"):
            return any(m.rpartition("@")[2] == passed[1:] for m in markers)
        return any(m.rpartition("@")[0] == passed for m in markers)

    def parameter_property(self, text: str) -> bool:
        """``<class>:<attr>``: does the class, or a base of it, define <attr> as a property whose getter
        takes `next(self.parameters())` (see model_class.parameter_properties)?"""
        name, _, attr = text.rpartition(":")
        work, seen = [name], set()
        while work:
            target = self.lookup(work.pop(0))
            if target is None or target in seen:
                continue
            seen.add(target)
            if attr in self._parameter_properties.get(target, ()):
                return True
            work.extend(self.bases[target])
        return False

    def wrapped_attribute(self, text: str) -> bool:
        """``<attr>@<module>``: does a scanned script store a DataParallel wrapper in `<obj>.<attr>` of
        an object other than self (scripts.wrapped_attributes), from a package that holds the module
        (a top-level script, or one in the module's package or above it)?"""
        attr, _, module = text.partition("@")
        return any(not package or module.startswith(package + ".")
                   for package in self._wrapped_attributes.get(attr, ()))

    def init_wrapped(self, text: str, trail: frozenset[str] = frozenset()) -> bool:
        """``<attr>@<class>``: does the class's `__init__`, or one of its bases', store a DataParallel
        wrapper in `self.<attr>` (scripts.init_wrapped_attributes)?"""
        attr, _, name = text.partition("@")
        target = self.lookup(name)
        if target is None or target in trail:
            return False
        return attr in self._init_wrapped.get(target, ()) or any(
            self.init_wrapped(f"{attr}@{base}", trail | {target}) for base in self.bases[target])

    def wrapping_method(self, method: str) -> bool:
        """Does a scanned module class define a method of this name that stores a DataParallel wrapper
        in an attribute of self (scripts.wrapping_methods)? The class of the value it is called on is
        not known where it is called (a trainer's constructor argument), so any such class answers."""
        return any(self.is_module(name) for name in self._wrapping_methods.get(method, ()))

    def called_late(self, method: str) -> bool:
        """May a call of the method run after another method of its instance has (scripts.method_calls)?
        False only where some scanned file calls it on an instance it has just built and none calls it
        any other way; a method no scanned file calls is not known to run early."""
        return method not in self._fresh_calls or method in self._later_calls

    def uncalled(self, text: str) -> str | None:
        """``<module>:<method>,...[:<base>,...]`` (scripts.UNCALLED_CONDITION): why a read that runs only
        through those methods is advice, or None: some scanned file other than <module> drives instances
        (calls their methods: ``method_calls``), no scanned file calls any of the methods, by that name on
        any object, and the class's bases of other files are scanned classes. A run of the class's file
        alone, or of a model library without its scripts, is not asked."""
        module, _, rest = text.partition(":")
        names, _, bases = rest.partition(":")
        methods = names.split(",")
        if not (self._calling_modules - {module}) or any(
                name in self._called or name in self._batch_feeds for name in methods):
            return None
        # (A base of another file that is no scanned class may call its subclasses' methods by name: a
        # framework's hooks.)
        if bases and not all(_tail(self.lookup(base) or base) in self._scanned for base in bases.split(",")):
            return None
        return (f"no scanned file calls {_shown(methods)}, while other scanned files call the project's objects: "
                "the scripts scanned never run it")

    def method_wraps(self, text: str) -> bool:
        """``<method>@<attr>``: does a method of that name of some scanned class store a DataParallel
        wrapper in `self.<attr>` (scripts.wrapping_methods)? The class of the object it is called on is
        not known where it is called (a trainer handed in), so any such class answers."""
        return text in self._method_wraps

    def handed_wrapper(self, text: str) -> bool:
        """``<module>.<function>@<k or keyword>:<attr>``: does a scanned file hand a DataParallel wrapper
        to that function (or class) there (scripts.handed_wrappers), without setting <attr> on a wrapper
        itself? A caller's name is followed through re-exports; one resolved from a different root
        matches by its last two parts (`utils.BPRLossT` for `code.utils.BPRLossT`), as classes do."""
        text, _, attr = text.rpartition(":")
        name, _, position = text.rpartition("@")
        for callee, entries in list(self._handed.items()):
            if not any(p == position and attr not in stored.split(",")
                       for p, _, stored in (e.partition("=") for e in entries)):
                continue
            for _ in range(8):
                if callee == name or callee not in self.aliases:
                    break
                callee = self.aliases[callee]
            if callee == name or _tail(callee) == _tail(name):
                return True
        return False

    def forward_flag(self, text: str) -> bool:
        """``<class>:<attr>``: does the class's own forward test `self.<attr>` (see
        model_class.forward_flags)? Its bases are not asked: a class that defines no forward, or
        one that overrides its base's, may not test it."""
        name, _, attr = text.rpartition(":")
        target = self.lookup(name)
        return target is not None and attr in self._forward_flags.get(target, ())

    def parallel_helper(self, text: str) -> bool:
        """``<function>@<i>[@<j>]``: does the function pass its parameter i on as the module (and j as
        the inputs) of a functional data_parallel call (functional.parallel_helpers)? The module
        that defines it is summarised when it was not scanned."""
        name, *positions = text.split("@")
        found = self._parallel_helpers.get(name)
        if found is None and self._load_for(name):
            found = self._parallel_helpers.get(name)
        return found is not None and tuple(positions) == found[:len(positions)]

    def pairing_helper(self, text: str) -> bool:
        """``<function>@<i>[,<j>...]``: does the function pair samples of one of those parameters by
        strided dim-0 slices (pairing.pairing_helpers)? Only scanned modules are read: the condition rides on
        every call of an imported function that is handed a batch tensor (about one per file in
        transformers `models/`), and summarising each callee's module would cost more than the
        rare helper is worth."""
        name, _, positions = text.rpartition("@")
        found = self._pairing_helpers.get(name, ())
        return any(position in found for position in positions.split(","))

    def moves_argument(self, text: str) -> bool:
        """``<function>@<k>|<name>``: does the function move that parameter to its input's device before
        using it (devices.moving_helpers)? A call passes it by position k or by name (k is -1 for a
        keyword). Only scanned modules are read, followed through re-exports."""
        name, _, passed = text.rpartition("@")
        position, _, param = passed.partition("|")
        found = self._moving_helpers.get(self._function(name, self._moving_helpers))
        if found is None:  # (`lib.utils.bbox_transform` scanned as `bbox_transform`: a root of its own)
            module, _, function = name.rpartition(".")
            found = next((self._moving_helpers[key] for key in (f"{m}.{function}" for m in self._modules_matching(module))
                          if key in self._moving_helpers), None)
        return bool(found) and any(entry.partition("|")[2] == param if position == "-1"
                                   else entry.partition("|")[0] == position for entry in found)

    def option_default(self, text: str) -> bool:
        """``<name>=<off|on>``: does every scanned definition of the command-line option (at least one)
        give it that truth by default (options.command_line_options)?"""
        name, _, state = text.partition("=")
        return self._options.get(name) == state

    def condition(self, text: str, trail: frozenset[str] = frozenset()) -> bool:
        kind, _, name = text.partition(":")
        if kind == "dp" and name:
            return self.is_dataparallel(name)
        if f"{kind}:" == BUILDER_CONDITION and name:
            return self.returns_wrapper(name, trail)
        if f"{kind}:" == BARE_BUILDER_CONDITION and name:
            return not self.returns_wrapper(name, trail)
        if f"{kind}:" == STOCK_OUTPUT_CONDITION and name:
            return self.stock_output(name)
        if f"{kind}:" == STOCK_METHOD_CONDITION and name:
            method, _, wrapper = name.partition(":")
            return not self.defines(wrapper, method)
        if f"{kind}:" == UNREDUCED_GATHER_CONDITION and name:
            position, _, wrapper = name.partition(":")
            return not self.reduces_gather(wrapper, position)
        if f"{kind}:" == LACKS_ATTRIBUTE_CONDITION and name:
            attribute, _, wrapper = name.partition(":")
            return not self.has_attribute(wrapper, attribute)
        if f"{kind}:" == REJECTS_CALL_CONDITION and name:
            method, _, rest = name.partition(":")
            count, _, wrapper = rest.partition(":")
            return self.rejects_call(wrapper, method, int(count))
        if kind == "gathered" and name:
            return self.gathered(name)
        if kind == "wrapped" and name:
            return self.wrapped(name)
        if kind == "in_model" and name:
            return self.in_model(name)
        if kind == "dim0" and name:
            return self.batch_dim_is_zero(name)
        if f"{kind}:" == BUILT_OUTSIDE_CONDITION and name:
            return self.built_outside(name)
        if kind == "outlives_call" and name:
            return self.outlives_call(name)
        if kind == "passed" and name:
            return self.passed(name)
        if f"{kind}:" == EVALUATED_CONDITION:
            return self.may_evaluate()
        if f"{kind}:" == WRAPPER_PASSES_CONDITION and name:
            return self.wrapper_passes(name)
        if kind == PREFIX_KEPT and name:
            self._load_for(name)  # the module that defines the loader, when it was not scanned
            return name.rsplit(".", 1)[-1] not in self._prefix_strippers
        if f"{kind}:" == UNRESUMED_CONDITION:
            return self.unresumed(name)
        if kind == UNPLACED and name:
            return self.unplaced(name)
        if kind == HOLDS_WEIGHTS and name:
            return self.holds_weights(name)
        if f"{kind}:" == SCALAR_FORWARD_CONDITION and name:
            return self.returns_scalar(name)
        if f"{kind}:" == SCALAR_FUNCTION_CONDITION and name:
            return self.scalar_function(name)
        if f"{kind}:" == NON_TENSOR_FORWARD_CONDITION and name:
            return self.non_tensor_forward(name)
        if f"{kind}:" == KEPT_MODULE_CONDITION and name:
            return self.keeps_module(name)
        if f"{kind}:" == PARTIAL_BATCHES_CONDITION and name:
            return self.keeps_partial_batches(name)
        if f"{kind}:" == PARTIAL_FEED_CONDITION and name:
            return self.feeds_partial_batches(name)
        if f"{kind}:" == PARAMETER_PROPERTY_CONDITION and name:
            return self.parameter_property(name)
        if f"{kind}:" == FORWARD_FLAG_CONDITION and name:
            return self.forward_flag(name)
        if f"{kind}:" == WRAPPED_ATTRIBUTE_CONDITION and name:
            return self.wrapped_attribute(name)
        if f"{kind}:" == PARALLEL_HELPER_CONDITION and name:
            return self.parallel_helper(name)
        if f"{kind}:" == STRIDED_PAIRING_CONDITION and name:
            return self.pairing_helper(name)
        if f"{kind}:" == INIT_WRAPPED_CONDITION and name:
            return self.init_wrapped(name)
        if f"{kind}:" == WRAPPING_METHOD_CONDITION and name:
            return self.wrapping_method(name)
        if f"{kind}:" == CALLED_LATE_CONDITION and name:
            return self.called_late(name)
        if f"{kind}:" == METHOD_WRAPS_CONDITION and name:
            return self.method_wraps(name)
        if f"{kind}:" == HANDED_WRAPPER_CONDITION and name:
            return self.handed_wrapper(name)
        if f"{kind}:" == UNMOVED_BY_CONDITION and name:
            return not self.moves_argument(name)
        if f"{kind}:" == OPTION_DEFAULT_CONDITION and name:
            return self.option_default(name)
        if f"{kind}:" == OPTION_NOT_DEFAULT_CONDITION and name:
            return not any(map(self.option_default, name.split(",")))
        return self.is_module(text)

    def holds(self, finding: Finding) -> bool:
        return all(any(self.condition(name) for name in names) for names in finding.requires)


# What ``ClassIndex._classes_in_use`` answers when the scanned files do not show what runs under
# DataParallel (an empty set is an answer: only library classes are wrapped).
_UNKNOWN: frozenset[str] = frozenset({"<unknown>"})


def _feed_name(entry: str) -> str:
    return _feed_entry(entry)[0]


def _feed_entry(entry: str) -> tuple[str, str]:
    """A ``batch_feeds`` entry -> (the name called, DROPPED or CALLED_IN + the function around it)."""
    if entry.endswith(DROPPED):
        return entry[:-len(DROPPED)], DROPPED
    name, _, function = entry.partition(CALLED_IN)
    return name, CALLED_IN + function


def _tail(qualname: str) -> str:
    """`module.Class`: what identifies a class across differently rooted dotted names
    (``".".join(qualname.rsplit(".", 2)[-2:])``, without the lists: every class and import of
    the run passes here)."""
    last = qualname.rfind(".")
    return qualname[qualname.rfind(".", 0, last) + 1:] if last > 0 else qualname


def _shown(names: list[str], quote: str = "`") -> str:
    """The first three names, quoted, and how many more."""
    shown = ", ".join(f"{quote}{n}{quote}" for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _relative(filename: str) -> str:
    """A file as a message shows it: relative to the working folder where it lies below it."""
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative
