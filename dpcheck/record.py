"""Record classes: ``@record`` makes a class of annotated fields what ``@dataclass`` makes it.

dpcheck's value types (findings, settings, per-file facts) were dataclasses. Creating a
dataclass ``exec``s generated source for each of its methods, and importing ``dataclasses``
imports ``inspect``: together about a sixth of a one-file run's time, paid on every run. A
record class is built from the same declarations by plain Python: one shared ``__init__``,
``__eq__``, ``__hash__`` and ``__repr__`` read the class's fields, so nothing is compiled.

What it keeps of ``@dataclass`` (the subset dpcheck uses): fields in annotation order
(inherited from record bases first), class-level defaults and :func:`field` with
``default``, ``default_factory``, ``init``, ``repr`` and ``compare``; ``__post_init__``;
positional and keyword arguments with the same errors for missing, unexpected or repeated
ones; instance attributes set in field order (``vars(obj)`` keeps that order); ``__eq__``
over the compared fields for two objects of the same class; ``frozen=True`` (assignment and
deletion raise :class:`FrozenInstanceError`, and the object hashes by its compared fields),
otherwise unhashable unless the class defines ``__hash__``; ``eq=False`` (identity); a
``Class(field=value, ...)`` repr. :func:`replace` and :func:`fields` stand for
``dataclasses.replace`` and ``dataclasses.fields``. Instances pickle and copy as any plain
object does (their ``__dict__``, or their slots). ``slots=True`` (a record with no record base)
keeps the fields in ``__slots__``: CPython shares one table of attribute names among a class's
instance dicts only up to 29 names or so (``SHARED_KEYS_MAX_SIZE``), and an object of more pays a
whole table of its own (about 1.3 KB).
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any

_MISSING: Any = object()
_FIELDS = "__record_fields__"


class FrozenInstanceError(AttributeError):
    """Assignment to (or deletion of) a field of a frozen record."""


class Field:
    """One declared field of a record class."""

    __slots__ = ("name", "default", "default_factory", "init", "repr", "compare")

    def __init__(self, default: Any = _MISSING, default_factory: Any = _MISSING, init: bool = True,
                 repr: bool = True, compare: bool = True) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.compare = compare

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def field(*, default: Any = _MISSING, default_factory: Any = _MISSING, init: bool = True, repr: bool = True,
          compare: bool = True) -> Any:
    """A field with a default, a default factory, or left out of ``__init__``/``repr``/``==``."""
    return Field(default, default_factory, init, repr, compare)


def fields(obj_or_class: Any) -> tuple[Field, ...]:
    """The fields of a record class or instance, in order."""
    found = getattr(obj_or_class, _FIELDS, None)
    if found is None:
        raise TypeError(f"{obj_or_class!r} is not a record class or instance")
    return found


def replace(obj: Any, /, **changes: Any) -> Any:
    """A new record like ``obj`` with ``changes`` (``dataclasses.replace``: fields left out of
    ``__init__`` cannot be changed and are computed again by ``__post_init__``)."""
    for f in fields(obj):
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
        elif f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def record(cls: type | None = None, /, *, frozen: bool = False, eq: bool = True, slots: bool = False):
    """Make ``cls`` a record class (``@record``, ``@record(frozen=True)``, ``@record(eq=False)``,
    ``@record(slots=True)``)."""
    if cls is None:
        return lambda c: _make(c, frozen, eq, slots)
    return _make(cls, frozen, eq, slots)


def _is_class_var(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _make(cls: type, frozen: bool, eq: bool, slots: bool = False) -> type:
    by_name: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get(_FIELDS, ()):
            by_name[f.name] = f
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_class_var(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name = name
        if isinstance(value, Field):
            if f.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        by_name.pop(name, None)
        by_name[name] = f
    all_fields = tuple(by_name.values())
    defaulted = False
    for f in all_fields:
        if not f.init:
            continue
        has_default = f.default is not _MISSING or f.default_factory is not _MISSING
        if defaulted and not has_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        defaulted = defaulted or has_default
    if slots:
        cls = _slotted(cls, all_fields)
    setattr(cls, _FIELDS, all_fields)
    if "__init__" not in cls.__dict__:
        cls.__init__ = _init_for(cls, all_fields, slots)
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = _repr_for(tuple(f.name for f in all_fields if f.repr))
    if eq:
        compared = tuple(f.name for f in all_fields if f.compare)
        if "__eq__" not in cls.__dict__:
            cls.__eq__ = _eq_for(compared)
        if frozen:
            if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
                cls.__hash__ = _hash_for(compared)
        elif "__hash__" not in cls.__dict__:
            cls.__hash__ = None  # as dataclasses: equal by value and mutable, so no hash
    if frozen:
        cls.__setattr__ = _frozen_setattr
        cls.__delattr__ = _frozen_delattr
    return cls


def _slotted(cls: type, all_fields: tuple[Field, ...]) -> type:
    """``cls`` made again with its fields in ``__slots__`` (slots are fixed when a class is made)."""
    if any(hasattr(base, _FIELDS) for base in cls.__mro__[1:]) or cls.__bases__ != (object,):
        raise TypeError(f"record(slots=True) of {cls.__qualname__}: a class with no base is supported")
    names = tuple(f.name for f in all_fields)
    namespace = {key: value for key, value in cls.__dict__.items()
                 if key not in names and key not in ("__dict__", "__weakref__")}
    namespace["__slots__"] = names
    namespace["__qualname__"] = cls.__qualname__
    return type(cls)(cls.__name__, cls.__bases__, namespace)


def _init_for(cls: type, all_fields: tuple[Field, ...], slots: bool = False):
    qualname = cls.__qualname__
    in_init = tuple(f for f in all_fields if f.init)
    names = frozenset(f.name for f in in_init)
    order = tuple(f.name for f in in_init)
    not_in_init = tuple(f for f in all_fields if not f.init and (f.default is not _MISSING
                                                                   or f.default_factory is not _MISSING))
    post_init = getattr(cls, "__post_init__", None) is not None
    # The usual call, positional arguments only: tails[n] is what the fields after the first n
    # get, (name, default, factory or None), or None where one of them has no default.
    tails: list[tuple[tuple[str, Any, Any], ...] | None] = []
    for n in range(len(in_init) + 1):
        rest = in_init[n:]
        if all(f.default is not _MISSING or f.default_factory is not _MISSING for f in rest):
            tails.append(tuple((f.name, f.default, None if f.default_factory is _MISSING else f.default_factory)
                               for f in rest + not_in_init))
        else:
            tails.append(None)

    def fill(values: dict, args: tuple, kwargs: dict) -> None:
        """Set every field's value in ``values`` (the instance's dict, or one for its slots)."""
        if not kwargs and len(args) < len(tails) and tails[len(args)] is not None:
            values.update(zip(order, args))
            for name, default, factory in tails[len(args)]:
                values[name] = default if factory is None else factory()
            return
        if len(args) > len(in_init):
            raise TypeError(f"{qualname}.__init__() takes {len(in_init) + 1} positional arguments "
                            f"but {len(args) + 1} were given")
        for f, value in zip(in_init, args):
            name = f.name
            if name in kwargs:
                raise TypeError(f"{qualname}.__init__() got multiple values for argument {name!r}")
            values[name] = value
        for f in in_init[len(args):]:
            name = f.name
            if name in kwargs:
                values[name] = kwargs[name]
            elif f.default is not _MISSING:
                values[name] = f.default
            elif f.default_factory is not _MISSING:
                values[name] = f.default_factory()
            else:
                raise TypeError(f"{qualname}.__init__() missing 1 required argument: {name!r}")
        if kwargs and not names.issuperset(kwargs):
            unknown = next(k for k in kwargs if k not in names)
            raise TypeError(f"{qualname}.__init__() got an unexpected keyword argument {unknown!r}")
        for f in not_in_init:
            values[f.name] = f.default if f.default is not _MISSING else f.default_factory()

    if slots:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            values: dict[str, Any] = {}
            fill(values, args, kwargs)
            for name, value in values.items():
                setattr(self, name, value)
            if post_init:
                self.__post_init__()
    else:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            fill(self.__dict__, args, kwargs)
            if post_init:
                self.__post_init__()

    __init__.__qualname__ = f"{qualname}.__init__"
    return __init__


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """The tuple of an object's values of ``names`` (in its dict or its slots)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return lambda obj: ()


def _repr_for(names: tuple[str, ...]):
    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    return __repr__


def _eq_for(names: tuple[str, ...]):
    values = _values_of(names)

    def __eq__(self, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return values(self) == values(other)

    return __eq__


def _hash_for(names: tuple[str, ...]):
    values = _values_of(names)

    def __hash__(self) -> int:
        return hash(values(self))

    return __hash__


def _frozen_setattr(self, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")
