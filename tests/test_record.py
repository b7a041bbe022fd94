"""dpcheck.record: what @record keeps of @dataclass for dpcheck's value types."""

import copy
import pickle

import pytest

from dpcheck.findings import Finding, Fix, Subject
from dpcheck.record import FrozenInstanceError, field, fields, record, replace


@record(frozen=True)
class Point:
    """A frozen record."""

    x: int
    y: int = 0
    tags: tuple = ()
    note: str = field(default="", compare=False)


@record
class Bag:
    """A mutable record with factories and a field computed after __init__."""

    name: str
    items: list = field(default_factory=list)
    size: int = field(init=False)
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.size = len(self.items)


@record
class Labelled(Bag):
    label: str = "none"


@record(eq=False)
class Handle:
    value: int = 0


def test_positional_keyword_and_default_arguments():
    assert (Point(1).x, Point(1).y, Point(1, 2).y, Point(y=3, x=4).x) == (1, 0, 2, 4)
    with pytest.raises(TypeError, match="missing 1 required argument: 'x'"):
        Point()
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=2)
    with pytest.raises(TypeError, match="multiple values for argument 'x'"):
        Point(1, x=2)
    with pytest.raises(TypeError, match="takes 5 positional arguments but 6 were given"):
        Point(1, 2, (), "", 5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'size'"):
        Bag("b", size=3)  # init=False


def test_attributes_are_set_in_field_order_whatever_the_keyword_order():
    assert list(vars(Point(y=1, note="n", x=2))) == ["x", "y", "tags", "note"]
    assert list(vars(Subject(class_name="C", attr="a"))) == [f.name for f in fields(Subject)]
    assert Subject(class_name="C", attr="a").to_dict() == {"attr": "a", "class_name": "C"}
    assert list(Subject(class_name="C", attr="a").to_dict()) == ["attr", "class_name"]


def test_factories_make_a_new_value_per_object_and_post_init_runs():
    a, b = Bag("a"), Bag("b", [1, 2])
    a.items.append(1)
    assert Bag("c").items == [] and a.cache is not Bag("d").cache
    assert (a.size, b.size) == (0, 2)


def test_fields_are_inherited_base_first():
    assert [f.name for f in fields(Labelled)] == ["name", "items", "size", "cache", "label"]
    assert Labelled("x", [1], label="y").size == 1
    with pytest.raises(TypeError, match="non-default argument"):
        @record
        class _Bad:
            a: int = 0
            b: int


def test_equality_compares_the_compared_fields_of_the_same_class():
    assert Point(1, 2) == Point(1, 2, note="other") and Point(1, 2) != Point(2, 1)
    assert Bag("a", [1]) == Bag("a", [1]) and Bag("a") != Bag("b")
    assert Point(1) != (1, 0, (), "") and Point(1).__eq__((1,)) is NotImplemented
    assert Labelled("a") != Bag("a")  # another class, even a subclass, is never equal
    nan = float("nan")
    assert Point(nan) == Point(nan)  # as dataclasses: tuples compare the same object as equal
    assert Handle(1) != Handle(1)  # eq=False: identity


def test_frozen_records_hash_by_value_and_refuse_assignment():
    assert hash(Point(1, 2)) == hash(Point(1, 2, note="x")) and len({Point(1), Point(1), Point(2)}) == 2
    p = Point(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 2
    with pytest.raises(AttributeError):  # FrozenInstanceError is one, as in dataclasses
        del p.y
    with pytest.raises(TypeError):
        hash(Bag("a"))  # mutable and equal by value: unhashable
    handle = Handle()
    assert hash(handle) == object.__hash__(handle)  # eq=False keeps object's hash


def test_replace_makes_a_new_record_and_recomputes_init_false_fields():
    p = Point(1, 2, ("a",), "n")
    q = replace(p, y=5)
    assert (q.x, q.y, q.tags, q.note, p.y) == (1, 5, ("a",), "n", 2)
    bag = replace(Bag("a", [1]), items=[1, 2, 3])
    assert (bag.name, bag.size) == ("a", 3)
    with pytest.raises(ValueError, match="init=False"):
        replace(Bag("a"), size=2)
    with pytest.raises(TypeError):
        replace(p, z=1)
    with pytest.raises(TypeError, match="not a record"):
        replace(object(), x=1)


def test_repr_names_the_repr_fields():
    assert repr(Point(1, note="n")) == "Point(x=1, y=0, tags=(), note='n')"
    assert repr(Bag("a")) == "Bag(name='a', items=[], size=0)"
    loop = Bag("loop")
    loop.items.append(loop)
    assert repr(loop) == "Bag(name='loop', items=[...], size=0)"


def test_records_pickle_and_copy():
    finding = Finding("DP101", "m", "error", "f.py", 1, 2, 3, 4, "line", Fix("fix", ()), subject=Subject(attr="a"))
    for clone in (pickle.loads(pickle.dumps(finding)), copy.copy(finding), copy.deepcopy(finding)):
        assert clone == finding and clone is not finding and hash(clone) == hash(finding)
    bag = pickle.loads(pickle.dumps(Bag("a", [1])))
    assert bag == Bag("a", [1]) and bag.size == 1


def test_field_refuses_both_a_default_and_a_factory():
    with pytest.raises(ValueError):
        field(default=1, default_factory=list)


def _size_of_rest(self) -> None:
    self.size = len(self.rest)


# A slotted record of more fields (45) than CPython's instance dicts share one table of names for.
Wide = record(slots=True)(type("Wide", (), {
    "__module__": __name__,
    "__annotations__": {"first": int, "rest": list, "label": str, "size": int, "hidden": dict,
                        **{f"f{i}": int for i in range(40)}},
    "rest": field(default_factory=list), "label": "w", "size": field(init=False, default=0),
    "hidden": field(default_factory=dict, repr=False, compare=False), "__post_init__": _size_of_rest,
    **{f"f{i}": i for i in range(40)}}))


def test_a_slotted_record_keeps_its_fields_in_slots_and_behaves_as_any_record():
    wide = Wide(1, [1, 2], f3=30)
    assert not hasattr(wide, "__dict__")  # no instance dict, whatever the number of fields
    assert (wide.first, wide.rest, wide.label, wide.size, wide.f3, wide.f39) == (1, [1, 2], "w", 2, 30, 39)
    assert Wide(1).rest is not Wide(1).rest and Wide(1) == Wide(1, hidden={"x": 1}) and Wide(1) != Wide(2)
    assert repr(Wide(1)).startswith("Wide(first=1, rest=[], label='w', size=0, f0=0,")
    changed = replace(wide, rest=[1])
    assert (changed.size, changed.f3, wide.size) == (1, 30, 2)
    for clone in (pickle.loads(pickle.dumps(wide)), copy.copy(wide), copy.deepcopy(wide)):
        assert clone == wide and clone is not wide and clone.hidden == {}
    with pytest.raises(TypeError, match="missing 1 required argument: 'first'"):
        Wide()
    with pytest.raises(TypeError, match="with no base"):
        @record(slots=True)
        class _Sub(Bag):
            extra: int = 0


def test_file_results_hold_their_fields_in_slots():
    from dpcheck.analysis.file import FileResult

    # Over 29 fields an instance dict has a table of names of its own (about 1.3 KB per file).
    assert len(fields(FileResult)) > 29 and not hasattr(FileResult("m.py", "m"), "__dict__")
    result = FileResult("m.py", "m", wrapped=["m.Net"])
    assert pickle.loads(pickle.dumps(result)) == result
