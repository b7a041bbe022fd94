"""Which classes no scanned file names: classes nothing in the project can build.

A class whose file never names it outside its own body, that no other scanned file imports,
names (a free name a star import binds, an attribute `loss.VGGLoss`, a string a registry looks
up) or subclasses, and that no decorator registers, is built by nothing the run can see: dead
code copied in with a file (bOEMD's HookBasedFeatureExtractor, TENet's VGGLoss). That holds only
where no scanned file looks the class up by a name it computes: `eval`, `__subclasses__()`,
`sys.modules`, `getattr` on a module imported by a computed name, ... can build any class of a module
without its name appearing anywhere in the code (it may come from a config file or the command line);
`getattr(module, name)`, `vars(module)[name]` or `module.__dict__[name]` on an imported module (of the
project or another library; torch's namespaces hold none of its classes), and `globals()[name]`, can
build only what that module binds (``lookup_namespaces``; the index asks which classes that is).

Each file records (``FileResult``): ``unnamed``, its candidates (top-level, undecorated classes
whose name starts with a capital, in a file that declares no `__all__`, named nowhere in the
file outside their own body except as the type an `isinstance`/`issubclass` test checks; a file
that declares `__all__` is wrapping._unused_outside_api's); ``mentions``, the capitalised names it
mentions that another file's class could be (names, attribute names and identifier strings,
less the names it imports by name, whose targets the import aliases carry, and less its own
top-level classes' names); ``builds_by_name``, whether it looks a class up by a computed name in a
way that may reach any class, and ``lookup_namespaces``, the modules it looks classes up in otherwise.
The project index settles it (``ClassIndex.unnamed``).
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from dpcheck.analysis.bare_calls import EVERY_MENTION, identifier_constants, torch_target
from dpcheck.analysis.names import callee_name
from dpcheck.analysis.reach import SUBMODULES
from dpcheck.analysis.tree import id_of as _id_of

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext

# Calls that look a name up in a namespace: with a name that is not a constant, they can build a
# class no code names.
_LOOKUP_CALLS = frozenset({"getattr", "eval", "exec"})
# Namespaces a subscript or `.get` with a computed key looks classes up in.
_NAMESPACE_CALLS = frozenset({"globals", "locals", "vars"})
# Attributes that enumerate classes, whatever they are read on.
_ENUMERATING_ATTRIBUTES = frozenset({"__subclasses__", "getmembers"})
# Calls that import a module by a computed name (`importlib.import_module("models." + name)`).
_IMPORT_CALLS = frozenset({"import_module", "__import__"})
# The package a computed module name starts with: dotted identifiers up to the last dot before what
# is filled in (`models.` of "models.%s_arch", "models.{}").
_PACKAGE_PREFIX = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.(?:[\w.]*[%{].*)?$")
# Library calls that build or return a class from a dotted path held in a config file, so the
# class's name appears in no Python file: Hydra's and detectron2's `instantiate(cfg.model)` (a
# `_target_` key in YAML), Hydra's `get_class`/`get_method`, `pydoc.locate`, `import_string`
# (Django, Werkzeug), Lightning's `LightningCLI` (a `class_path` in YAML).
_PATH_RESOLVING_CALLS = frozenset({"instantiate", "get_class", "get_method", "locate", "import_string",
                                   "LightningCLI"})
# In a file no rule analyses (it names no torch token, see file.RELEVANT_TOKENS), its text alone
# tells: any of these words may look a class up by name, and any word with a capital may name one. The
# builtins count only as free names called: `tester.eval()`, `parser.exec()` are methods of an object (a
# script's `model.eval()`), not Python's `eval`, and a word of a docstring or a help string (`--eval`,
# DeVLBert's "eval - dict of {metric: score}") calls nothing.
_BY_NAME_WORDS = re.compile(r"\b(?:(?:getattr|eval|exec|globals|locals|vars)\s*\(|(?:__subclasses__|getmembers|__dict__"
                            r"|import_module|__import__|sys\.modules|" + "|".join(sorted(_PATH_RESOLVING_CALLS))
                            + r")\b)")
# ... where it is no method (`tester.eval()`): checked on each match, not by a look-behind in the
# pattern, which would cost the scan its literal prefix search (twice the time on a model library).
_FREE_BUILTINS = frozenset({"getattr", "eval", "exec", "globals", "locals", "vars"})
# The receiver of `self.__dict__`, an object's own attributes, never a module's classes.
_OWN_OBJECT = "self."
# Any word with a capital may name a class (bare_calls.may_name_class: `mIoULoss` too).
_CLASS_LIKE_WORD = re.compile(r"\b\w*[A-Z]\w*")
# The same for loading a module by a name (ClassIndex.unreached): a call, not a word of a docstring.
_LOADS_BY_NAME_WORDS = re.compile(r"\b(?:import_module|__import__|exec|" + "|".join(sorted(_PATH_RESOLVING_CALLS))
                                  + r")\s*\(")


def capitalised(name: str) -> bool:
    """The names this summary tracks: a class named with a lower-case initial is never a candidate."""
    return name[:1].isupper()


def summarize_mentions(ctx: FileContext, unnamed: frozenset[str], result) -> None:
    """Fill ``result.unnamed``, ``.mentions`` and ``.builds_by_name`` from the file's walk."""
    own = {stmt.name for stmt in ctx.tree.body if isinstance(stmt, ast.ClassDef)}
    imported = ctx.imports.aliases.keys()
    names: set[str] = set(map(_id_of, ctx.nodes(ast.Name)))
    torch_names = {alias for alias, target in ctx.imports.aliases.items() if torch_target(target)}
    names.update(node.attr for node in ctx.nodes(ast.Attribute)
                 if capitalised(node.attr) and not (torch_names and _of_torch(node, torch_names)))
    names.update(identifier_constants(ctx))
    result.mentions = sorted(name for name in names if capitalised(name) and name not in own and name not in imported)
    result.unnamed = sorted(f"{ctx.module}.{name}" for name in unnamed)
    result.builds_by_name, namespaces = _builds_by_name(ctx)
    result.lookup_namespaces = sorted(namespaces)
    summarize_loads(ctx, result)


def summarize_loads(ctx: FileContext, result) -> None:
    """Fill ``result.loads_by_name`` from the file's walk, and add the modules it loads by a name
    it writes out (or their package's, ``reach.SUBMODULES``) to ``.imports``."""
    result.loads_by_name, loaded = _loads_by_name(ctx)
    if loaded:
        result.imports = sorted(set(result.imports).union(loaded))


def summarize_text_mentions(text: str, result, tree: ast.Module | None = None) -> None:
    """The same facts from the text of a file no rule walks (conservatively: comments count). With
    the file's ``tree``, the lines of its top-level imports are left out of the mentions: a package
    `__init__.py` that re-exports a class builds nothing (as a walked file's imports do not count)."""
    named = text
    if tree is not None:
        lines = text.splitlines(keepends=True)
        for stmt in tree.body:
            if stmt.__class__ is ast.Import or stmt.__class__ is ast.ImportFrom:
                for row in range(stmt.lineno - 1, stmt.end_lineno):
                    lines[row] = "\n"
        named = "".join(lines)
    result.mentions = sorted(set(_CLASS_LIKE_WORD.findall(named)))
    result.escaping = [EVERY_MENTION]  # (bare_calls: any of them may be handed on)
    result.builds_by_name = _free_match(_BY_NAME_WORDS, text)
    result.loads_by_name = _free_match(_LOADS_BY_NAME_WORDS, text)


def _of_torch(node: ast.Attribute, torch_names: set[str]) -> bool:
    """Is the attribute read off a name the file imports from torch (`nn.RNN`, `torch.nn.Linear`)?
    Then it names torch's class, never the project's class of that simple name (speechbrain's `RNN`
    beside a model built of `nn.RNN`)."""
    root = node.value
    while root.__class__ is ast.Attribute:
        root = root.value
    return root.__class__ is ast.Name and root.id in torch_names


def _free_match(pattern: re.Pattern, text: str) -> bool:
    """Does ``pattern`` match ``text`` other than as a method of an object (`.eval(`, `.exec(`) or as
    an instance's own attribute table (`self.__dict__[key] = value` in a config class: `self` is no
    module, as ``_may_be_module`` reads it in a walked file)?"""
    for match in pattern.finditer(text):
        start = match.start()
        word = match.group(0).partition("(")[0].rstrip()
        if start and text[start - 1] == "." and (
                word in _FREE_BUILTINS or word == "__dict__" and _own_object(text, start)):
            continue
        return True
    return False


def _own_object(text: str, start: int) -> bool:
    """Is the attribute at ``start`` read on `self` (not on `myself`, `x.self`)?"""
    before = start - len(_OWN_OBJECT)
    return text.startswith(_OWN_OBJECT, before) and before >= 0 and not (
        before and (text[before - 1].isalnum() or text[before - 1] in "_."))


def _loads_by_name(ctx: FileContext) -> tuple[bool, list[str]]:
    """Whether the file loads a module by a name it computes (`__import__(name)`, Hydra's
    `instantiate(cfg.model)`, `pydoc.locate(path)`, `exec`), and the modules it loads by a constant
    name (`importlib.import_module("task.pose")`) or by a name that a constant package starts
    (`import_module(f"basicsr.archs.{name}")`, a registry's: any module of that package,
    ``reach.SUBMODULES``)."""
    loaded: list[str] = []
    for call in ctx.nodes(ast.Call):
        name = callee_name(call)
        if name in _PATH_RESOLVING_CALLS or name == "exec" and call.func.__class__ is ast.Name:
            return True, loaded
        if name in _IMPORT_CALLS:
            if call.args and not _computed(call.args[0]):
                loaded.append(call.args[0].value)
            elif call.args and (package := _constant_package(call.args[0])):
                loaded.append(package + SUBMODULES)
            else:
                return True, loaded
    return False, loaded


def _constant_package(arg: ast.AST) -> str | None:
    """The package a computed module name starts with, written out: `"models." + name`,
    f"models.{name}", `"models.{}".format(name)`, `"models.%s" % name`; None where the name may be any
    (`name`, a relative `"." + name`, `prefix + name`)."""
    while arg.__class__ is ast.BinOp and (arg.op.__class__ is ast.Add or arg.op.__class__ is ast.Mod):
        arg = arg.left
    if arg.__class__ is ast.JoinedStr:
        arg = arg.values[0] if arg.values else arg
    elif arg.__class__ is ast.Call and arg.func.__class__ is ast.Attribute and arg.func.attr == "format":
        arg = arg.func.value
    if arg.__class__ is not ast.Constant or not isinstance(arg.value, str):
        return None
    match = _PACKAGE_PREFIX.match(arg.value)
    return match.group(1) if match else None


def _builds_by_name(ctx: FileContext) -> tuple[bool, set[str]]:
    """(whether the file may look up any class by a computed name, the modules it looks classes up in
    by a computed name where a lookup reaches no other): `getattr(nets, name)` on an imported module
    hands out only what that module binds (its classes, what it imports or star-imports), and
    `globals()[name]` only this module's names; `eval`, `__subclasses__()`, `sys.modules`, a lookup on
    a module imported by a computed name or on a call's result may reach any."""
    calls = ctx.nodes(ast.Call)
    # Names that may hold a module: what the file imports, and what an import by a computed name
    # returns (`module = importlib.import_module("models." + name)`). Not torch's own namespaces:
    # `getattr(torch, window)`, `getattr(nn, activation)`, `getattr(torch.optim, name)` return
    # torch's functions and classes, never a class of the project.
    modules = {alias for alias, target in ctx.imports.aliases.items() if not torch_target(target)}
    computed: set[str] = set()
    for call in calls:
        if callee_name(call) in _IMPORT_CALLS:
            parent = ctx.tree_index.parents.get(call)
            if parent.__class__ is ast.Assign:
                computed.update(t.id for t in parent.targets if t.__class__ is ast.Name)
    modules |= computed
    namespaces: set[str] = set()

    def namespace(node: ast.AST) -> bool:
        """Record the module ``node`` names; False where it may be any (a call's result, a module
        imported by a computed name, a name the imports do not resolve)."""
        root = node
        while root.__class__ is ast.Attribute:
            root = root.value
        resolved = ctx.resolve(node) if root.__class__ is ast.Name and root.id not in computed else None
        if resolved:
            namespaces.add(resolved)
        return bool(resolved)

    for call in calls:
        name = callee_name(call)
        if name in _PATH_RESOLVING_CALLS:
            return True, namespaces  # instantiate(cfg.model), hydra.utils.instantiate(...), pydoc.locate(path)
        if call.func.__class__ is not ast.Name:
            continue
        if name == "getattr":
            if len(call.args) >= 2 and _computed(call.args[1]) and _may_be_module(call.args[0], modules) \
                    and not namespace(call.args[0]):
                return True, namespaces
        elif name in _LOOKUP_CALLS:  # eval, exec
            return True, namespaces
        elif name in _NAMESPACE_CALLS and (name != "vars" or call.args and _may_be_module(call.args[0], modules)):
            parent = ctx.tree_index.parents.get(call)
            if parent.__class__ is ast.Subscript or parent.__class__ is ast.Attribute:
                # globals()[name], vars(module).get(name); not vars(args).items()
                if name == "vars" and not namespace(call.args[0]):
                    return True, namespaces
                if name != "vars":
                    namespaces.add(ctx.module)
    for attribute in ctx.nodes(ast.Attribute):
        attr = attribute.attr
        if attr in _ENUMERATING_ATTRIBUTES \
                or attr == "modules" and attribute.value.__class__ is ast.Name and attribute.value.id == "sys":
            return True, namespaces  # Base.__subclasses__(), inspect.getmembers(module), sys.modules
        if attr == "__dict__" and _may_be_module(attribute.value, modules) and not namespace(attribute.value):
            return True, namespaces  # module.__dict__ of a module it cannot name
    return False, namespaces


def _computed(arg: ast.AST) -> bool:
    return not (arg.__class__ is ast.Constant and isinstance(arg.value, str))


def _may_be_module(node: ast.AST, modules: set[str]) -> bool:
    """Can ``node`` be a module or a class (a name the file imports or imported by a computed name,
    a call's result, `sys.modules[...]`) rather than an object of the program (`self`, `args`)?"""
    if node.__class__ is ast.Call or node.__class__ is ast.Subscript:
        return True  # getattr(importlib.import_module(path), name), sys.modules[__name__]
    root = node
    while root.__class__ is ast.Attribute:
        root = root.value
    return root.__class__ is ast.Name and root.id in modules
