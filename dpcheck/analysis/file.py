"""Check one file: parse once, compute the shared facts, run every selected rule.

``analyze_source`` is a pure function of (path, text, selected rules): it never looks
at other files, so it can run in a worker process and its result can be cached by
content. What it cannot decide alone (is ``MyBase``, imported from another file, an
nn.Module?) it records as a condition on the finding, and ``dpcheck.index`` settles
it once every file's class summary is known.
"""

from __future__ import annotations

import ast
import errno
import gc
import os
import re
import stat
import warnings
from pathlib import Path
from typing import Sequence

from dpcheck.analysis.bare_calls import result_bindings, summarize_bare_calls
from dpcheck.analysis.batch_feeds import summarize_batch_feeds, summarize_text_calls
from dpcheck.analysis.checkpoints import summarize_checkpoint_loads, summarize_checkpoints
from dpcheck.analysis.classes import UNKNOWN_BASE, collect_classes, module_status
from dpcheck.analysis.context import FileContext
from dpcheck.analysis.devices import summarize_moving_helpers
from dpcheck.analysis.functional import summarize_parallel_helpers
from dpcheck.analysis.options import summarize_options
from dpcheck.analysis.training import trains_models
from dpcheck.analysis.pairing import summarize_pairing_helpers
from dpcheck.analysis.guards import summarize_calls
from dpcheck.analysis.mentions import summarize_loads, summarize_text_mentions
from dpcheck.analysis.model_class import file_models, summarize_forward_flags, summarize_parameter_properties
from dpcheck.analysis.names import ImportMap, declared_all, module_aliases, module_name_for
from dpcheck.analysis.outputs import summarize_scalar_forwards
from dpcheck.analysis.placement import summarize_placement, summarize_weightless
from dpcheck.analysis.scripts import (
    OWN_METHOD_CONDITION,
    dataparallel_attributes,
    handed_wrappers,
    init_wrapped_attributes,
    method_calls,
    switches_to_eval,
    wrapping_methods,
    wrapped_attributes,
)
from dpcheck.analysis.source import SourceFile, suppressed
from dpcheck.analysis.tree import TreeIndex, statement_nodes
from dpcheck.analysis.handed import handed_calls, records_calls
from dpcheck.analysis.wrapping import (function_returns, harness_of, method_returns, summarize_construction,
                                       summarize_wrapping, untraced_functions, replicates_by_hand)
from dpcheck.constants import INTERNAL_ERROR, NOTEBOOK_SUFFIX, SYNTAX_ERROR
from dpcheck.findings import Edit, Finding, Severity
from dpcheck.record import field, record, replace
from dpcheck.rule import Rule, Violation

# A file that mentions none of these has no module code and no DataParallel script:
# it is parsed (its classes may be bases elsewhere) but no rule runs on it.
RELEVANT_TOKENS = ("torch", "nn.", "Module", "forward", "DataParallel")
# Top-level packages no project module is named after: imports of them are not kept (FileResult.imports).
# (A short list: a project may have a module named like some other one, `code/` or `test.py`.)
_NOT_PROJECT_ROOTS = frozenset({
    "torch", "torchvision", "torchaudio", "numpy", "scipy", "pandas", "sklearn", "matplotlib", "PIL", "cv2",
    "tqdm", "yaml", "os", "sys", "re", "json", "math", "time", "random", "argparse", "logging", "collections",
    "itertools", "functools", "typing", "pathlib", "copy", "pickle", "shutil", "glob", "warnings", "datetime",
    "__future__", "abc", "dataclasses", "enum", "subprocess", "csv", "io", "string", "inspect"})



@record
class ClassSummary:
    """A class of the file as other files see it: its qualified name and resolved bases."""

    qualname: str
    bases: tuple[str, ...]


# In slots: with more than about 29 fields each result's instance dict would carry its own table of
# names (see dpcheck.record), about 3 MiB in each process on transformers `models/`.
@record(slots=True)
class FileResult:
    """What the analysis of one file tells the run: its findings and its cross-file summary."""

    filename: str
    module: str
    findings: list[Finding] = field(default_factory=list)
    classes: list[ClassSummary] = field(default_factory=list)
    # Names this module imports (for re-exports: `from .block import Block` in __init__).
    aliases: dict[str, str] = field(default_factory=dict)
    internal_error: bool = False
    # What this file's scripts tell other files (dpcheck.analysis.wrapping): functions that
    # return a DataParallel wrapper (qualname -> the cross-file conditions of one such return),
    # classes it wraps, and classes it builds inside another module (submodules) -> simple names
    # of the classes they are layers of (wrapping.layer_owners).
    builders: dict[str, list[str]] = field(default_factory=dict)
    wrapped: list[str] = field(default_factory=list)
    layer_owners: dict[str, list[str]] = field(default_factory=dict)
    # Classes this file wraps with `dim=k` other than 0 -> k's source text: their batch dim.
    wrapped_dims: dict[str, str] = field(default_factory=dict)
    # Lines of wrap sites whose module's class is not known (see wrapping.unresolved_wrap_sites).
    unresolved_wraps: list[int] = field(default_factory=list)
    # Classes its `__all__` leaves out and the file itself never uses (wrapping._unused_outside_api).
    unused: list[str] = field(default_factory=list)
    # Simple names this file calls in forward-reachable code of its modules (an instance built per
    # call, on the replica) and anywhere else (wrapping.summarize_construction).
    built_per_call: list[str] = field(default_factory=list)
    built_elsewhere: list[str] = field(default_factory=list)
    # How it calls the modules its classes hold: class -> what the calls pass (guards.module_calls).
    module_calls: dict[str, list[str]] = field(default_factory=dict)
    # Its functions that strip a wrapper's `module.` prefix from keys (checkpoints.summarize_checkpoints).
    prefix_strippers: list[str] = field(default_factory=list)
    # Its classes whose constructor moves them to a device (placement.summarize_placement).
    self_placing: list[str] = field(default_factory=list)
    # Its module classes whose constructor builds no weights of its own -> the classes it builds
    # there, whose weights the index looks at (placement.summarize_weightless).
    weightless: dict[str, list[str]] = field(default_factory=dict)
    # How its scripts call the DataParallel wrappers they build: class wrapped -> what each call
    # passes (guards.wrapper_calls).
    wrapper_calls: dict[str, list[str]] = field(default_factory=dict)
    # The other wrap sites: each one's candidate leaves (wrapping.wrap_candidates), and the
    # module-level functions whose returns are traced -> their leaves (wrapping.function_returns).
    wrap_candidates: list[list[str]] = field(default_factory=list)
    returns: dict[str, list[str]] = field(default_factory=dict)
    # Its module classes whose forward returns a 0-dim value -> the options that decide it
    # (outputs.scalar_forwards).
    scalar_forwards: dict[str, list[str]] = field(default_factory=dict)
    # Classes it wraps only as imported classes built from plain arguments (wrapping.wrapped_alone).
    wrapped_alone: list[str] = field(default_factory=list)
    # Its DataParallel subclasses whose forward does not return the gathered output (scripts.replaced_output).
    replaced_output: list[str] = field(default_factory=list)
    # Its DataParallel subclasses -> the attributes each defines itself (scripts.dataparallel_attributes),
    # and the classes it wraps -> the wrappers it wraps them in (wrapping.wrappers_of).
    dataparallel_attributes: dict[str, list[str]] = field(default_factory=dict)
    wrappers: dict[str, list[str]] = field(default_factory=dict)
    # For a file that wraps a model: whether it drops the partial last batch (scripts.partial_batches).
    partial_batches: str = ""
    # Its module classes -> the `__init__` parameters they keep as submodules they call (wrapping.kept_modules).
    kept_modules: dict[str, list[str]] = field(default_factory=dict)
    # Its classes -> their properties whose getter takes `next(self.parameters())`
    # (model_class.parameter_properties).
    parameter_properties: dict[str, list[str]] = field(default_factory=dict)
    # How it loads checkpoints as they are: into a wrapper, into anything else
    # (checkpoints.summarize_checkpoint_loads).
    checkpoint_loads: str = ""
    # Its classes -> the attributes of `self` their own forward compares with a string (model_class.forward_flags).
    forward_flags: dict[str, list[str]] = field(default_factory=dict)
    # Its classes that nothing in the file names, the capitalised names it mentions that another
    # file's class may have, and whether it looks classes up by a computed name (mentions).
    unnamed: list[str] = field(default_factory=list)
    mentions: list[str] = field(default_factory=list)
    builds_by_name: bool = False
    # The namespaces (modules) it looks classes up in by a computed name, where the lookup can reach no
    # other (`getattr(nets, name)`, `globals()[name]`: mentions.lookup_namespaces); builds_by_name is
    # for lookups that may reach any class.
    lookup_namespaces: list[str] = field(default_factory=list)
    # Whether it loads a module by a name it computes (mentions._loads_by_name).
    loads_by_name: bool = False
    # Attributes of objects other than self it stores a DataParallel wrapper in (scripts.wrapped_attributes).
    wrapped_attributes: list[str] = field(default_factory=list)
    # Classes it builds and only calls outside any module, one entry per binding; the classes it
    # names in any other way; the attributes it reads in any other way (bare_calls).
    bare_built: list[str] = field(default_factory=list)
    escaping: list[str] = field(default_factory=list)
    passed_attributes: list[str] = field(default_factory=list)
    # The functions whose every call here, outside module classes, is bound so: `<function>=<binding>`
    # per binding (bare_calls: what a builder of a bare class hands its instance to).
    result_bindings: list[str] = field(default_factory=list)
    # Its module-level functions that pass two parameters on to the functional data_parallel -> the
    # positions of the module and the inputs (functional.parallel_helpers).
    parallel_helpers: dict[str, list[str]] = field(default_factory=dict)
    # Its module-level functions that pair samples of a parameter by strided dim-0 slices -> the
    # positions of those parameters (pairing.pairing_helpers).
    pairing_helpers: dict[str, list[str]] = field(default_factory=dict)
    # Module-level functions that move a parameter to their input's device before using it -> that
    # parameter's `<position>|<name>` (devices.moving_helpers).
    moving_helpers: dict[str, list[str]] = field(default_factory=dict)
    # Its classes -> the attributes of self their `__init__` stores a DataParallel wrapper in
    # (scripts.init_wrapped_attributes).
    init_wrapped: dict[str, list[str]] = field(default_factory=dict)
    # Its classes -> `<method>@<attr>` for their other methods that store a DataParallel wrapper in an
    # attribute of self (scripts.wrapping_methods).
    wrapping_methods: dict[str, list[str]] = field(default_factory=dict)
    # The modules its star imports read from, in order (names.ImportMap.star_modules), and the names
    # a literal `__all__` declares (None where it declares none): what a star import of it binds.
    star_imports: list[str] = field(default_factory=list)
    # The project modules it imports, as its import statements name them (names.ImportMap.modules,
    # less torch's and the standard library's): the index follows them from the files that wrap.
    imports: list[str] = field(default_factory=list)
    # Lines of the wrap sites traced to no class inside a function of a module that is no script:
    # its callers decide what runs (wrapping.handed_wrap_sites).
    handed_wraps: list[int] = field(default_factory=list)
    # `<attr>@<class>` -> what that class's methods put into `self.<attr>` item by item, for a base of
    # another file that wraps every item (wrapping.item_stores).
    item_stores: dict[str, list[str]] = field(default_factory=dict)
    # `<callee>@<k or keyword>` for each call that hands a DataParallel wrapper to an imported function
    # or class (scripts.handed_wrappers).
    handed_wrappers: list[str] = field(default_factory=list)
    # The method names it calls on an instance it has only just built, and those it calls otherwise
    # (scripts.method_calls).
    fresh_calls: list[str] = field(default_factory=list)
    later_calls: list[str] = field(default_factory=list)
    # The simple names of the functions and methods it calls, and its calls fed only by loaders that
    # drop the partial last batch, or once per call of the function around them (batch_feeds).
    called: list[str] = field(default_factory=list)
    batch_feeds: list[str] = field(default_factory=list)
    declared_all: list[str] | None = None
    # Its module-level functions every return of which is 0-dim (outputs.scalar_functions).
    scalar_functions: list[str] = field(default_factory=list)
    # The command-line options its parsers define, `<name>=<off|on|?>` by their default's truth
    # (options.command_line_options): the project's option table.
    options: list[str] = field(default_factory=list)
    # Whether it records what its calls hand the project's functions and classes, and those records
    # (handed.handed_calls): a wrap site that wraps a parameter runs what they pass.
    calls_recorded: bool = False
    handed_calls: list[str] = field(default_factory=list)
    # Its module-level functions whose returns are not all traced (a module loaded by a computed
    # name may be asked for one of them: wrapping.MODULES_LEAF).
    untraced_functions: list[str] = field(default_factory=list)
    # The methods of its classes without a forward that return a value, `<module>.<Class>.<method>` ->
    # their returns' leaves, or `?` where one is not traced (wrapping.method_returns).
    method_returns: dict[str, list[str]] = field(default_factory=dict)
    # Its module classes whose forward returns, on every return, a value gather cannot take apart
    # (outputs.non_tensor_forwards).
    non_tensor_forwards: list[str] = field(default_factory=list)
    # Whether it runs a training loop of its own: a backward pass in a loop, an optimizer step
    # (training.trains_models); whether it replicates a model by hand (wrapping.replicates_by_hand).
    trains: bool = False
    replicates: bool = False
    # Whether it may put a model in eval mode (scripts.switches_to_eval).
    switches_to_eval: bool = False
    # Classes it wraps only as built behind switches off by default -> each wrap site's switches
    # (wrapping.latent_wraps).
    latent_wraps: dict[str, list[str]] = field(default_factory=dict)

    @property
    def submodules(self) -> list[str]:
        return list(self.layer_owners)

    def to_dict(self) -> dict:
        return {"filename": self.filename, "module": self.module, "internal_error": self.internal_error,
                "aliases": self.aliases, "classes": [[c.qualname, list(c.bases)] for c in self.classes],
                "findings": [f.to_dict() for f in self.findings], "builders": self.builders,
                "wrapped": self.wrapped, "wrapped_dims": self.wrapped_dims,
                "layer_owners": {k: " ".join(v) for k, v in self.layer_owners.items()},
                "unresolved_wraps": self.unresolved_wraps, "unused": self.unused,
                # Name lists of the cross-file facts as one space-separated string each (names and
                # call markers hold no spaces): on a large tree they are most of the cache's strings,
                # and a warm run reads every file's entry.
                "built_per_call": " ".join(self.built_per_call), "built_elsewhere": " ".join(self.built_elsewhere),
                "module_calls": {k: " ".join(v) for k, v in self.module_calls.items()},
                # Rare facts, written only when present: a warm run reads every file's entry.
                **({"prefix_strippers": " ".join(self.prefix_strippers)} if self.prefix_strippers else {}),
                **({"self_placing": " ".join(self.self_placing)} if self.self_placing else {}),
                **({"weightless": {k: " ".join(v) for k, v in self.weightless.items()}} if self.weightless else {}),
                **({"wrapper_calls": {k: " ".join(v) for k, v in self.wrapper_calls.items()}}
                   if self.wrapper_calls else {}),
                **({"wrap_candidates": [" ".join(v) for v in self.wrap_candidates]} if self.wrap_candidates else {}),
                **({"returns": {k: " ".join(v) for k, v in self.returns.items()}} if self.returns else {}),
                **({"scalar_forwards": {k: " ".join(v) for k, v in self.scalar_forwards.items()}}
                   if self.scalar_forwards else {}),
                **({"scalar_functions": " ".join(self.scalar_functions)} if self.scalar_functions else {}),
                **({"options": " ".join(self.options)} if self.options else {}),
                **({"non_tensor_forwards": " ".join(self.non_tensor_forwards)} if self.non_tensor_forwards else {}),
                **({"wrapped_alone": " ".join(self.wrapped_alone)} if self.wrapped_alone else {}),
                **({"replaced_output": " ".join(self.replaced_output)} if self.replaced_output else {}),
                **({"dataparallel_attributes": {k: " ".join(v) for k, v in self.dataparallel_attributes.items()}}
                   if self.dataparallel_attributes else {}),
                **({"wrappers": {k: " ".join(v) for k, v in self.wrappers.items()}} if self.wrappers else {}),
                **({"latent_wraps": {k: " ".join(v) for k, v in self.latent_wraps.items()}} if self.latent_wraps else {}),
                **({"partial_batches": self.partial_batches} if self.partial_batches else {}),
                **({"switches_to_eval": True} if self.switches_to_eval else {}),
                **({"kept_modules": {k: " ".join(v) for k, v in self.kept_modules.items()}}
                   if self.kept_modules else {}),
                **({"parameter_properties": {k: " ".join(v) for k, v in self.parameter_properties.items()}}
                   if self.parameter_properties else {}),
                **({"checkpoint_loads": self.checkpoint_loads} if self.checkpoint_loads else {}),
                **({"forward_flags": {k: " ".join(v) for k, v in self.forward_flags.items()}}
                   if self.forward_flags else {}),
                **({"unnamed": " ".join(self.unnamed)} if self.unnamed else {}),
                **({"mentions": " ".join(self.mentions)} if self.mentions else {}),
                **({"builds_by_name": True} if self.builds_by_name else {}),
                **({"lookup_namespaces": " ".join(self.lookup_namespaces)} if self.lookup_namespaces else {}),
                **({"loads_by_name": True} if self.loads_by_name else {}),
                **({"wrapped_attributes": " ".join(self.wrapped_attributes)} if self.wrapped_attributes else {}),
                **({"bare_built": " ".join(self.bare_built)} if self.bare_built else {}),
                **({"escaping": " ".join(self.escaping)} if self.escaping else {}),
                **({"passed_attributes": " ".join(self.passed_attributes)} if self.passed_attributes else {}),
                **({"result_bindings": " ".join(self.result_bindings)} if self.result_bindings else {}),
                **({"parallel_helpers": {k: " ".join(v) for k, v in self.parallel_helpers.items()}}
                   if self.parallel_helpers else {}),
                **({"init_wrapped": {k: " ".join(v) for k, v in self.init_wrapped.items()}}
                   if self.init_wrapped else {}),
                **({"wrapping_methods": {k: " ".join(v) for k, v in self.wrapping_methods.items()}}
                   if self.wrapping_methods else {}),
                **({"pairing_helpers": {k: " ".join(v) for k, v in self.pairing_helpers.items()}}
                   if self.pairing_helpers else {}),
                **({"moving_helpers": {k: " ".join(v) for k, v in self.moving_helpers.items()}}
                   if self.moving_helpers else {}),
                **({"star_imports": " ".join(self.star_imports)} if self.star_imports else {}),
                **({"imports": " ".join(self.imports)} if self.imports else {}),
                **({"handed_wraps": self.handed_wraps} if self.handed_wraps else {}),
                **({"item_stores": {k: " ".join(v) for k, v in self.item_stores.items()}} if self.item_stores else {}),
                **({"handed_wrappers": " ".join(self.handed_wrappers)} if self.handed_wrappers else {}),
                **({"fresh_calls": " ".join(self.fresh_calls)} if self.fresh_calls else {}),
                **({"later_calls": " ".join(self.later_calls)} if self.later_calls else {}),
                **({"called": " ".join(self.called)} if self.called else {}),
                **({"batch_feeds": " ".join(self.batch_feeds)} if self.batch_feeds else {}),
                **({"declared_all": " ".join(self.declared_all)} if self.declared_all is not None else {}),
                **({"calls_recorded": True} if self.calls_recorded else {}),
                **({"handed_calls": " ".join(self.handed_calls)} if self.handed_calls else {}),
                **({"untraced_functions": " ".join(self.untraced_functions)} if self.untraced_functions else {}),
                **({"method_returns": {k: " ".join(v) for k, v in self.method_returns.items()}}
                   if self.method_returns else {}),
                **({"trains": True} if self.trains else {}),
                **({"replicates": True} if self.replicates else {})}

    @classmethod
    def from_dict(cls, data: dict) -> "FileResult":
        """Raises on anything malformed (the cache treats that as a miss)."""
        return cls(str(data["filename"]), str(data["module"]),
                   [Finding.from_dict(f) for f in data["findings"]],
                   [ClassSummary(str(q), tuple(str(b) for b in bases)) for q, bases in data["classes"]],
                   {str(k): str(v) for k, v in dict(data["aliases"]).items()}, bool(data["internal_error"]),
                   {str(k): [str(c) for c in v] for k, v in dict(data["builders"]).items()},
                   [str(n) for n in data["wrapped"]],
                   {str(k): v.split() for k, v in dict(data["layer_owners"]).items()},
                   {str(k): str(v) for k, v in dict(data["wrapped_dims"]).items()},
                   [int(n) for n in data["unresolved_wraps"]], [str(n) for n in data["unused"]],
                   data["built_per_call"].split(), data["built_elsewhere"].split(),
                   {str(k): v.split() for k, v in dict(data["module_calls"]).items()},
                   data.get("prefix_strippers", "").split(), data.get("self_placing", "").split(),
                   {str(k): v.split() for k, v in dict(data.get("weightless", {})).items()},
                   {str(k): v.split() for k, v in dict(data.get("wrapper_calls", {})).items()},
                   [str(v).split() for v in data.get("wrap_candidates", ())],
                   {str(k): str(v).split() for k, v in dict(data.get("returns", {})).items()},
                   {str(k): str(v).split() for k, v in dict(data.get("scalar_forwards", {})).items()},
                   data.get("wrapped_alone", "").split(), data.get("replaced_output", "").split(),
                   {str(k): str(v).split() for k, v in dict(data.get("dataparallel_attributes", {})).items()},
                   {str(k): str(v).split() for k, v in dict(data.get("wrappers", {})).items()},
                   str(data.get("partial_batches", "")),
                   {str(k): str(v).split() for k, v in dict(data.get("kept_modules", {})).items()},
                   {str(k): str(v).split() for k, v in dict(data.get("parameter_properties", {})).items()},
                   checkpoint_loads=str(data.get("checkpoint_loads", "")),
                   forward_flags={str(k): str(v).split() for k, v in dict(data.get("forward_flags", {})).items()},
                   unnamed=str(data.get("unnamed", "")).split(), mentions=str(data.get("mentions", "")).split(),
                   builds_by_name=bool(data.get("builds_by_name", False)),
                   lookup_namespaces=str(data.get("lookup_namespaces", "")).split(),
                   loads_by_name=bool(data.get("loads_by_name", False)),
                   wrapped_attributes=str(data.get("wrapped_attributes", "")).split(),
                   bare_built=str(data.get("bare_built", "")).split(), escaping=str(data.get("escaping", "")).split(),
                   passed_attributes=str(data.get("passed_attributes", "")).split(),
                   result_bindings=str(data.get("result_bindings", "")).split(),
                   parallel_helpers={str(k): str(v).split()
                                     for k, v in dict(data.get("parallel_helpers", {})).items()},
                   init_wrapped={str(k): str(v).split() for k, v in dict(data.get("init_wrapped", {})).items()},
                   wrapping_methods={str(k): str(v).split()
                                     for k, v in dict(data.get("wrapping_methods", {})).items()},
                   pairing_helpers={str(k): str(v).split()
                                    for k, v in dict(data.get("pairing_helpers", {})).items()},
                   moving_helpers={str(k): str(v).split()
                                   for k, v in dict(data.get("moving_helpers", {})).items()},
                   star_imports=str(data.get("star_imports", "")).split(),
                   imports=str(data.get("imports", "")).split(),
                   handed_wraps=[int(n) for n in data.get("handed_wraps", [])],
                   item_stores={str(k): str(v).split() for k, v in dict(data.get("item_stores", {})).items()},
                   handed_wrappers=str(data.get("handed_wrappers", "")).split(),
                   fresh_calls=str(data.get("fresh_calls", "")).split(),
                   later_calls=str(data.get("later_calls", "")).split(),
                   called=str(data.get("called", "")).split(),
                   batch_feeds=str(data.get("batch_feeds", "")).split(),
                   declared_all=str(data["declared_all"]).split() if "declared_all" in data else None,
                   scalar_functions=str(data.get("scalar_functions", "")).split(),
                   options=str(data.get("options", "")).split(),
                   calls_recorded=bool(data.get("calls_recorded", False)),
                   handed_calls=str(data.get("handed_calls", "")).split(),
                   untraced_functions=str(data.get("untraced_functions", "")).split(),
                   method_returns={str(k): str(v).split() for k, v in dict(data.get("method_returns", {})).items()},
                   non_tensor_forwards=str(data.get("non_tensor_forwards", "")).split(),
                   trains=bool(data.get("trains", False)),
                   replicates=bool(data.get("replicates", False)),
                   switches_to_eval=bool(data.get("switches_to_eval", False)),
                   latent_wraps={str(k): str(v).split() for k, v in dict(data.get("latent_wraps", {})).items()})


def read_bytes(path: Path) -> bytes:
    """The file's bytes; raises OSError for anything but a regular file. Opened without
    blocking, so a FIFO or a device named like a .py file is refused instead of waited on."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        # Read with the descriptor itself: a file object and its buffer cost more than reading a
        # small file does. One read asks for a byte past the size, so a file that grew is read to its end.
        chunks = [os.read(fd, status.st_size + 1)]
        while chunks[-1]:
            chunks.append(os.read(fd, 1 << 20))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_source(path: Path) -> str:
    """Decode like Python does: a BOM or coding cookie, else UTF-8. Raises UnicodeDecodeError."""
    data = read_bytes(path)
    # Most files: no BOM and no coding cookie (which must say "coding" in one of the first two
    # lines), so ``tokenize.detect_encoding`` would answer UTF-8; valid UTF-8 throughout, so it
    # would raise nothing either. Only the others pay for importing tokenize.
    first_end = data.find(b"\n")
    second_end = data.find(b"\n", first_end + 1) if first_end >= 0 else -1
    if not data.startswith(b"\xef\xbb\xbf") and b"coding" not in (data if second_end < 0 else data[:second_end]):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass  # tokenize's own error (or a declared encoding it finds) decides
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def analyze_path(path: Path, display: str, rules: Sequence[Rule], module: str | None = None) -> FileResult:
    """Never raises: a file that cannot be read or decoded gets DP001, see ``analyze_source``."""
    if str(path).endswith(NOTEBOOK_SUFFIX):
        from dpcheck.analysis.notebook import analyze_notebook  # only runs that meet a notebook pay its import

        try:
            return analyze_notebook(path, display, rules, module or module_name_for(path))
        except Exception as exc:  # noqa: BLE001 - one notebook's failure must not end the run
            return _file_error(display, module or path.stem, INTERNAL_ERROR,
                               f"Internal error while analysing the notebook: {_describe(exc)}; please report it")
    try:
        text = read_source(path)
        module = module or module_name_for(path)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return _file_error(display, module or path.stem, SYNTAX_ERROR,
                           f"File is not valid UTF-8 (or its declared encoding): {exc}")
    except OSError as exc:
        return _file_error(display, module or path.stem, SYNTAX_ERROR, f"Cannot read file: {exc.strerror or exc}")
    except MemoryError:
        return _file_error(display, module or path.stem, SYNTAX_ERROR, "Cannot read file: too large for memory")
    return analyze_source(text, display, rules, module, is_package=path.name == "__init__.py")


def _file_error(display: str, module: str, code: str, message: str, line_text: str = "") -> FileResult:
    """The result of a file whose analysis stopped: one DP001 or DP002 finding at 1:1."""
    result = FileResult(display, module, internal_error=code == INTERNAL_ERROR)
    result.findings.append(Finding(code, message, "error", display, 1, 1, 1, 1, line_text))
    return result


def _describe(exc: BaseException) -> str:
    import traceback  # only when a rule failed: not on every run

    where = traceback.extract_tb(exc.__traceback__)
    place = f" ({Path(where[-1].filename).name}:{where[-1].lineno})" if where else ""
    return f"{type(exc).__name__}: {str(exc)[:300]}{place}"


def analyze_source(text: str, display: str, rules: Sequence[Rule], module: str,
                   is_package: bool = False) -> FileResult:
    """Never raises: whatever goes wrong costs this file's result only. A file Python itself
    cannot parse (syntax, or nesting too deep for its parser) gets DP001; a failure of
    dpcheck's own analysis gets DP002 (one per failing rule, or one for the file)."""
    # A file's analysis allocates hundreds of thousands of objects (its tree, the facts) and
    # frees nearly all of them by reference counting when it ends; the cyclic collector,
    # triggered every 700 allocations, would only re-scan them (a sixth of the parse time).
    # It is paused for the file and resumes after it, so cycles are still collected per file.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _analyze_source(text, display, rules, module, is_package)
    except RecursionError as exc:
        return _file_error(display, module, INTERNAL_ERROR, f"Internal error: the file is nested too deeply "
                           f"to analyse ({_describe(exc)}); please report it")
    except Exception as exc:  # MemoryError included: a bug or a limit of dpcheck, not of the file
        return _file_error(display, module, INTERNAL_ERROR, f"Internal error while analysing the file: "
                           f"{_describe(exc)}; please report it")
    finally:
        if collecting:
            gc.enable()


# The newest grammar that still takes `async` and `await` as names. PyTorch before 0.4 spelled
# non_blocking `async` (`target.cuda(async=True)`), so many DataParallel training scripts of that
# era are valid Python 3.6 that Python 3.7+ refuses; read with this grammar, their wraps and
# hazards count instead of the whole script being lost to a syntax error.
_OLDER_GRAMMAR = (3, 6)


def _parse(text: str, display: str) -> ast.Module:
    """The file's tree under the running Python's grammar, else under `_OLDER_GRAMMAR`; the first
    SyntaxError is raised when neither reads it (it names what the running Python refuses)."""
    try:
        return ast.parse(text, filename=display)
    except SyntaxError as exc:
        if "async" not in text and "await" not in text:
            raise
        try:
            return ast.parse(text, filename=display, feature_version=_OLDER_GRAMMAR)
        except SyntaxError:
            raise exc from None


# A word `import` on a line of code (a comment's is not), and where an import statement starts on it:
# at the line's start or after `;` or `:` (`try: import apex`).
_IMPORT_WORD = re.compile(r"\bimport\b")
_IMPORT_STATEMENT = re.compile(r"(?:^|[;:])[ \t]*((?:from[ \t]+[\w.]+[ \t]+)?import\b)")


def _text_imports(text: str, module: str, is_package: bool) -> list[str] | None:
    """The project modules a file that does not parse imports (as ``FileResult.imports``), read off
    its text: each import statement parsed alone, to the end of its line (a parenthesised or
    backslash-continued one to its end; a `;` ends it). None where a line holds the word `import`
    outside a comment and no import statement that parses (a docstring's, a Python 2 idiom): what the
    file imports is then not known. A Python 2 script (`print "..."`) or one with a typo still runs
    what it imports, wherever the rest of it fails."""
    lines = text.splitlines()
    nodes: list[ast.stmt] = []
    row = 0
    while row < len(lines):
        code = lines[row].partition("#")[0]
        start = row
        row += 1
        if not _IMPORT_WORD.search(code):
            continue
        match = _IMPORT_STATEMENT.search(code)
        if match is None:
            return None
        statement = code[match.start(1):]
        # (continued: `from a import (b,` to its closing parenthesis, `import a, \` to its last line)
        while row < len(lines) and (statement.rstrip().endswith("\\") or "(" in statement and ")" not in statement):
            statement = statement.rstrip().removesuffix("\\") + " " + lines[row].partition("#")[0].strip()
            row += 1
        try:
            parsed = ast.parse(statement.partition(";")[0].strip()).body
        except SyntaxError:
            return None
        if not all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in parsed):
            return None
        for node in parsed:
            node.lineno = start + 1
        nodes += parsed
    imports = ImportMap(ast.Module(body=[], type_ignores=[]), module, is_package, nodes)
    return _project_modules(imports)


def _project_modules(imports: ImportMap) -> list[str]:
    """The modules an import map takes, less those of packages no project module is named after
    (``_NOT_PROJECT_ROOTS``): ``FileResult.imports``."""
    return sorted(m for m in imports.modules if m.partition(".")[0] not in _NOT_PROJECT_ROOTS)


def _analyze_source(text: str, display: str, rules: Sequence[Rule], module: str,
                    is_package: bool) -> FileResult:
    source = SourceFile(display, text)
    result = FileResult(display, module)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in user code
            tree = _parse(text, display)
    except (RecursionError, MemoryError) as exc:
        # CPython cannot compile it either ("maximum recursion depth exceeded during ast
        # construction", parser stack overflow): the file cannot be parsed.
        return _file_error(display, module, SYNTAX_ERROR, f"{type(exc).__name__}: the file is nested too "
                           f"deeply or is too large for Python's parser ({str(exc)[:200]})")
    except (SyntaxError, ValueError) as exc:
        row = getattr(exc, "lineno", None) or 1
        col = getattr(exc, "offset", None) or 1
        if "\0" in text and getattr(exc, "lineno", None) is None:
            # The parser names no position for a NUL byte: find it like the tokenizer would.
            row, col = source.position(text.index("\0"))
            col += 1
        msg = getattr(exc, "msg", None) or str(exc)
        result.findings.append(Finding(SYNTAX_ERROR, f"SyntaxError: {msg}", "error", display, row,
                                       max(col, 1), row, max(col, 1), source.line(row), None, row))
        summarize_text_mentions(text, result)  # (what it names, read off its text)
        imported = _text_imports(text, module, is_package)
        if imported is None:
            result.loads_by_name = True  # (what it imports is not known: the files it reaches are not)
        else:
            result.imports = imported
        if "DataParallel" in text or "data_parallel" in text:
            # A script that may wrap a model but cannot be read: what the project wraps is not fully known.
            result.unresolved_wraps = [row]
        return result

    index = TreeIndex(tree)  # walked when a rule first needs it
    relevant = any(token in text for token in RELEVANT_TOKENS)
    # Imports and classes: from the walk where rules will walk the file anyway (they run on its
    # classes: nearly every file of a model library), else from a walk of the statements alone.
    statements = index.by_type if relevant and "class" in text else statement_nodes(tree)
    imports = ImportMap(tree, module, is_package,
                        statements.get(ast.Import, []) + statements.get(ast.ImportFrom, []))
    classes = collect_classes(tree, imports, module, statements.get(ast.ClassDef, []))
    ctx = FileContext(source, tree, module, imports, classes, module_status(classes, module, imports, index), index)
    # A class taken for a module on an unknown base carries that condition as a pseudo-base, so a
    # subclass in another file inherits it (see dpcheck.analysis.classes.module_status).
    result.classes = [ClassSummary(c.qualname, c.bases + tuple(
        n for n in ctx.module_status.get(name, (False, ()))[1] if n.startswith(UNKNOWN_BASE)))
        for name, c in classes.items()]
    result.aliases = {name: target for name, target in imports.aliases.items()
                      if target != name and "." in target}
    result.aliases.update(module_aliases(tree, imports))
    result.star_imports = imports.star_modules
    result.imports = _project_modules(imports)
    if "__all__" in text:
        declared = declared_all(tree)
        result.declared_all = None if declared is None else sorted(declared)
    result.trains = trains_models(ctx)
    result.replicates = replicates_by_hand(ctx)

    summarize_options(ctx, result)  # (an options file mostly has no torch: before the test below)
    if not relevant:
        # Nothing here can be a hazard: the class summary is all the index needs, what its functions
        # return (a builder of the model another file's script wraps, without torch's name), and what a
        # subclass of another file's DataParallel subclass defines (a script reads it on the wrapper).
        if ctx.module_functions:
            result.returns = function_returns(ctx)
            result.untraced_functions = untraced_functions(ctx, result.returns)
        if ctx.classes and "return" in text:
            result.method_returns = method_returns(ctx)
        if "Parallel" in text:
            result.dataparallel_attributes = dataparallel_attributes(ctx)
        # and which of its classes' properties take `next(self.parameters())` (a mixin without
        # torch's name: a model class of another file that reads the property in forward learns it here).
        summarize_parameter_properties(ctx, result)
        # and what it names or looks up by name (a registry or a config table without torch's name),
        # and what it calls (a launcher calling a model's training method).
        summarize_text_mentions(text, result, tree)
        if result.loads_by_name:  # (the text's words say it may: the walk tells which modules)
            summarize_loads(ctx, result)
        summarize_text_calls(text, result)
        # and what a script's calls hand the project's trainers (one that imports no torch).
        _record_calls(ctx, rules, result)
        # and whether it puts a model in eval mode (an evaluation helper handed the model).
        result.switches_to_eval = switches_to_eval(ctx)
        return result
    try:
        _run_rules(ctx, rules, result)
    finally:
        # Some facts refer back to the context (ScriptFacts does): a reference cycle that would
        # keep the whole tree alive until the cyclic collector runs. Dropping them now lets
        # reference counting free the file's analysis as soon as it ends.
        ctx.drop_facts()
    return result


def _record_calls(ctx: FileContext, rules: Sequence[Rule], result: FileResult) -> None:
    """``result.handed_calls`` of a script or trainer (handed.records_calls). Not of a module summary
    (no rules: a file outside the scan), whose callers are not all known."""
    if rules and records_calls(ctx):
        result.calls_recorded = True
        result.handed_calls = handed_calls(ctx)
        result.result_bindings = result_bindings(ctx)


def _run_rules(ctx: FileContext, rules: Sequence[Rule], result: FileResult) -> None:
    source, display = ctx.source, ctx.source.path
    summarize_wrapping(ctx, result)
    summarize_calls(ctx, result)
    # (Module summaries too: `unplaced:<class>` and `prefix_kept:<function>` load the module they name.)
    summarize_placement(ctx, result)
    summarize_weightless(ctx, result)
    summarize_checkpoints(ctx, result)
    summarize_scalar_forwards(ctx, result)
    summarize_parameter_properties(ctx, result)
    summarize_forward_flags(ctx, result)
    result.wrapped_attributes = wrapped_attributes(ctx)
    summarize_bare_calls(ctx, result)
    summarize_parallel_helpers(ctx, result)
    summarize_pairing_helpers(ctx, result)
    summarize_moving_helpers(ctx, result)
    result.init_wrapped = init_wrapped_attributes(ctx)
    result.wrapping_methods = wrapping_methods(ctx)
    result.handed_wrappers = handed_wrappers(ctx)
    _record_calls(ctx, rules, result)
    result.fresh_calls, result.later_calls = method_calls(ctx)
    if not rules:  # a module summary (see engine.summarize_module): the model classes serve rules only
        return
    # Only scanned files tell how the project loads its checkpoints (a module summary is of a file
    # outside the scan).
    summarize_checkpoint_loads(ctx, result)
    models = file_models(ctx)
    # A class that parallelises its own submodule runs its own code on replicas only where a
    # scanned file wraps it too: every class rule's findings in its own code carry that condition.
    harnesses = {id(model): harness for model in models if (harness := harness_of(model))}

    seen: set[tuple] = set()
    for rule in rules:
        # A rule that checks files only (the script rules) is not asked about each class.
        class_models = models if type(rule).check_class is not Rule.check_class else ()
        try:
            raw: list[tuple[Violation, tuple[frozenset[str], ...], tuple[str, ...]]] = []
            for model in class_models:
                if rule.forward_code_only and not model.reachable:
                    continue  # nothing of the class runs in forward: nothing for such a rule to report
                model.conditions.clear()
                found = list(rule.check_class(model))
                if not found:  # most (rule, class) pairs: nothing more to do
                    continue
                base_req = (model.requires,) if model.requires else ()
                conditions = tuple(frozenset({c}) for c in sorted(model.conditions))
                harness = harnesses.get(id(model))
                advice = (f"{OWN_METHOD_CONDITION}{rule.wrapper_method}:{model.info.qualname}",) \
                    if rule.wrapper_method else ()
                for v in found:
                    if v.subject.class_name is None:  # every class rule's finding names its class
                        v.subject = replace(v.subject, class_name=model.name)
                    if v.subject.attr is None:  # `self.<attr>` the flagged node is about, if any
                        v.subject = replace(v.subject, attr=_self_attribute(v.node))
                    own = (frozenset({harness.condition}),) if harness and harness.owns(v.node) else ()
                    raw.append((v, base_req + conditions + own, advice))
            for v in rule.check_file(ctx):
                raw.append((v, (), ()))
            found = [_finding(rule, v, requires, source, advice) for v, requires, advice in raw]
        except Exception as exc:  # a rule bug (RecursionError, MemoryError too) must not hide other rules' findings
            result.internal_error = True
            result.findings.append(Finding(
                INTERNAL_ERROR, f"Internal error in rule {rule.code}: {_describe(exc)}; please report it",
                "error", display, 1, 1, 1, 1, source.line(1)))
            continue
        for finding in found:
            # The same node reported for two classes (a module-level function both call, a method
            # a subclass inherits) is kept once per way it may settle: each class's cross-file
            # conditions and advice are its own, and settling reports it where any of them holds
            # (RunResult.settle_file keeps one per position).
            key = (finding.code, finding.row, finding.col, finding.end_row, finding.end_col, finding.requires,
                   finding.error_if, finding.advice_if, finding.subject.class_name)
            if key in seen:
                continue
            seen.add(key)
            if suppressed(finding.code, source.file_noqa) or suppressed(finding.code, source.noqa_codes(finding.row)):
                finding = replace(finding, suppressed=True)
            result.findings.append(finding)
    # After the rules: the forward-reachable code of each model is walked by then.
    summarize_construction(ctx, models, result)
    # What it calls, and which calls loaders feed: from the walk the rules made; a file they did not
    # walk below its statements (no module class, no DataParallel) is read as text instead, which
    # costs less than a walk for this alone.
    if "order" in ctx.tree_index.__dict__:
        summarize_batch_feeds(ctx, result)
    else:
        summarize_text_calls(source.text, result)


def _finding(rule: Rule, v: Violation, requires: tuple, source: SourceFile, advice: tuple[str, ...] = ()) -> Finding:
    row, col, end_row, end_col = source.span(v.node)
    severity = (v.severity or rule.severity)
    fix = v.fix
    if fix is not None:  # rules write ast byte offsets; reports and --fix use characters
        fix = replace(fix, edits=tuple(
            Edit(e.content, e.row, source.char_column(e.row, e.col), e.end_row,
                 source.char_column(e.end_row, e.end_col)) for e in fix.edits))
    return Finding(rule.code, v.message, Severity(severity).value, source.path, row, col + 1,
                   end_row, end_col + 1, source.line(row), fix, row,
                   requires + tuple(v.requires), subject=v.subject, error_if=tuple(v.error_if),
                   advice_if=advice + tuple(v.advice_if))


def _self_attribute(node: ast.AST) -> str | None:
    """`self.steps`, `self.cache[k]`, `self.items.append(x)` -> the attribute of `self` they
    are about (read from the node, never from a message)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return node.attr
        node = node.func if isinstance(node, ast.Call) else node.value
    return None
