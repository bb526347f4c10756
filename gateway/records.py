"""Record classes for the modules that every ``arrowgate`` command imports.

``@dataclass`` writes each class's ``__init__``, ``__repr__`` and ``__eq__`` (a
frozen class's ``__hash__``, ``__setattr__`` and ``__delattr__`` too) as source
text and compiles it while the class's module is imported: 0.3-1.2 ms a class,
15.6 ms of CPU for the 24 classes that a csv query through ``arrowgate query``
defined, a tenth of a whole 1M-row query (Python 3.11, docs/benchmarks.md,
issue 23). A record lists its fields in ``__slots__`` and writes its own
``__init__``; :class:`Record` derives the rest from the slots, once:

- ``repr`` names every field (but those in ``_unshown``) with its value;
- equality is field by field between records of the same class, as a
  dataclass's (the fields compared as one tuple, so a field holding the very
  same NaN object is equal to itself);
- :class:`Record` is unhashable, like a mutable dataclass; :class:`FrozenRecord`
  hashes its fields, like a frozen one. Its fields are annotated ``Final``, so
  that the type checker refuses an assignment outside ``__init__`` (nothing
  refuses it at run time);
- :func:`fields` and :func:`replace` stand for ``dataclasses.fields`` and
  ``dataclasses.replace``.

Classes of modules that a short command does not import stay dataclasses.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar


class Record:
    """A class whose fields are its ``__slots__``: repr and field-wise equality."""

    __slots__ = ()
    #: every slot of the class and its bases, in order (set for each subclass)
    _fields: ClassVar[tuple[str, ...]] = ()
    #: fields left out of ``repr`` (a sample's rows, say)
    _unshown: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            slots = klass.__dict__.get("__slots__", ())
            names.extend([slots] if isinstance(slots, str) else slots)
        # "__dict__" in the slots lets an instance take attributes besides its fields
        cls._fields = tuple(name for name in names if not name.startswith("__"))

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}"
                          for name in self._fields if name not in self._unshown)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    __hash__: ClassVar[None] = None  # type: ignore[assignment]


class FrozenRecord(Record):
    """A :class:`Record` not changed after ``__init__`` (its fields are ``Final``): hashable."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())


#: (bound to the class, not its name: a name is compiled as a forward reference, 1 ms)
R = TypeVar("R", bound=Record)


def fields(record: type[Record] | Record) -> tuple[str, ...]:
    """The names of a record's fields, in order."""
    return record._fields


def replace(record: R, **changes: Any) -> R:
    """A copy of ``record`` with ``changes``, through its ``__init__``.

    A field ``__init__`` does not take is one it works out (``Layout.lower_names``):
    the copy works it out again, and changing it is refused, as ``dataclasses.replace``
    refuses to change an ``init=False`` field.
    """
    name = type(record).__qualname__
    unknown = set(changes) - set(record._fields)
    if unknown:
        raise TypeError(f"{name} has no field {sorted(unknown)[0]!r}")
    code = type(record).__init__.__code__
    takes = set(code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount])
    derived = set(changes) - takes
    if derived:
        raise ValueError(f"{name}.{sorted(derived)[0]} is worked out by {name}(), not given")
    values = {field: getattr(record, field) for field in record._fields if field in takes}
    values.update(changes)
    return type(record)(**values)
