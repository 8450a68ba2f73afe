"""``record``: a class statement made into a named tuple, as ``typing.NamedTuple`` makes it.

    @record
    class Occurrence:
        file: str
        start: int
        end: int = 0

is the class ``class Occurrence(NamedTuple): ...`` gives (a ``collections.namedtuple``
with the fields, defaults, methods, properties and docstring of the class
statement), less the parts that cost: ``typing.NamedTuple`` turns every field's
annotation into a ``ForwardRef``, compiling it, and ``collections.namedtuple``
compiles each class's ``__new__`` from source (``eval``); the named tuples a
lookup imports paid a tenth of the CLI's start-up for that (issue 16). Here the
annotations stay the text they are (``from __future__ import annotations``), and
``__new__`` is a copy of a function compiled with this module (``_NEW``, one per
field count) with its arguments renamed to the fields: the same bytecode as
namedtuple's, so making an instance costs what it did, and no compile at import.
The class is made by one ``type()`` call over its whole namespace.

>>> @record
... class Point:
...     '''A point.'''
...     x: int
...     y: int = 0
...
...     @property
...     def norm1(self) -> int:
...         return abs(self.x) + abs(self.y)
>>> p = Point(3, y=-4)
>>> p, p.norm1, p._replace(y=1), p._asdict(), Point._make([1, 2]), Point.__doc__
(Point(x=3, y=-4), 7, Point(x=3, y=1), {'x': 3, 'y': -4}, Point(x=1, y=2), 'A point.')
>>> Point(1, 2, 3)
Traceback (most recent call last):
TypeError: Point.__new__() takes from 2 to 3 positional arguments but 4 were given

Cost: O(fields + attributes) per class, a few microseconds; namedtuple's
``eval`` alone took about 30 us a class.
"""
from __future__ import annotations

import sys
from types import FunctionType

try:
    from _collections import _tuplegetter
except ImportError:                     # not CPython: a property over itemgetter, as namedtuple does
    from operator import itemgetter as _itemgetter

    def _tuplegetter(index, doc):
        return property(_itemgetter(index), doc=doc)

# typing.NamedTuple's rules: these may not be defined by the class, and these are not copied
_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                         "_make", "_replace", "_asdict", "_source"})
_NOT_COPIED = frozenset({"__module__", "__name__", "__annotations__", "__dict__", "__weakref__"})

_tuple_new = tuple.__new__

# __new__ for 0..12 fields, compiled with this module (so loaded from its .pyc, not compiled at import);
# a class's __new__ is a copy of _NEW[len(fields)] whose arguments are renamed to its fields
_NEW = (
    lambda _cls: _tuple_new(_cls, ()),
    lambda _cls, a: _tuple_new(_cls, (a,)),
    lambda _cls, a, b: _tuple_new(_cls, (a, b)),
    lambda _cls, a, b, c: _tuple_new(_cls, (a, b, c)),
    lambda _cls, a, b, c, d: _tuple_new(_cls, (a, b, c, d)),
    lambda _cls, a, b, c, d, e: _tuple_new(_cls, (a, b, c, d, e)),
    lambda _cls, a, b, c, d, e, f: _tuple_new(_cls, (a, b, c, d, e, f)),
    lambda _cls, a, b, c, d, e, f, g: _tuple_new(_cls, (a, b, c, d, e, f, g)),
    lambda _cls, a, b, c, d, e, f, g, h: _tuple_new(_cls, (a, b, c, d, e, f, g, h)),
    lambda _cls, a, b, c, d, e, f, g, h, i: _tuple_new(_cls, (a, b, c, d, e, f, g, h, i)),
    lambda _cls, a, b, c, d, e, f, g, h, i, j: _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j)),
    lambda _cls, a, b, c, d, e, f, g, h, i, j, k: _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k)),
    lambda _cls, a, b, c, d, e, f, g, h, i, j, k, l: _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k, l)),
)
_more_new: dict[int, FunctionType] = {}     # beyond _NEW: compiled once per field count


def _new_code(count: int):
    """The code of a ``__new__`` for ``count`` fields (arguments named ``_cls``, then any names).

    >>> _new_code(2).co_varnames, _new_code(20).co_argcount
    (('_cls', 'a', 'b'), 21)
    """
    if count < len(_NEW):
        return _NEW[count].__code__
    if count not in _more_new:
        args = ", ".join(f"a{i}" for i in range(count))
        _more_new[count] = eval(f"lambda _cls, {args}: _tuple_new(_cls, ({args},))", {"_tuple_new": _tuple_new})
    return _more_new[count].__code__


def _named_tuple_methods(name: str, fields: tuple[str, ...]) -> dict:
    """``_make``, ``_replace``, ``__repr__``, ``_asdict`` and ``__getnewargs__`` of a
    named tuple ``name`` of ``fields``, each its own function (named ``name.method``, as
    namedtuple names them), behaving as namedtuple's do."""
    count = len(fields)
    shown = "(" + ", ".join(f"{f}=%r" for f in fields) + ")"

    def _make(cls, iterable):
        made = _tuple_new(cls, iterable)
        if len(made) != count:
            raise TypeError(f"Expected {count} arguments, got {len(made)}")
        return made
    _make.__doc__ = f"Make a new {name} object from a sequence or iterable"

    def _replace(self, /, **kwds):
        made = self._make(map(kwds.pop, fields, self))
        if kwds:
            raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
        return made
    _replace.__doc__ = f"Return a new {name} object replacing specified fields with new values"

    def __repr__(self):
        "Return a nicely formatted representation string"
        return self.__class__.__name__ + shown % self

    def _asdict(self):
        "Return a new dict which maps field names to their values."
        return dict(zip(self._fields, self))

    def __getnewargs__(self):
        "Return self as a plain tuple.  Used by copy and pickle."
        return tuple(self)

    methods = {"_make": _make, "_replace": _replace, "__repr__": __repr__, "_asdict": _asdict,
               "__getnewargs__": __getnewargs__}
    for key, method in methods.items():
        method.__qualname__ = f"{name}.{key}"
    methods["_make"] = classmethod(_make)
    return methods


def record(cls: type) -> type:
    """The named tuple ``class cls(typing.NamedTuple)`` would be (see the module's docstring).

    Raises what typing.NamedTuple raises: TypeError for a field without a default after
    one with, AttributeError for a class that defines one of namedtuple's own names
    (``_PROHIBITED``), ValueError for a field named with a leading underscore.
    """
    ns = cls.__dict__
    name = cls.__name__
    types = ns.get("__annotations__", {})
    fields = tuple(types)
    defaults = []
    for field in fields:
        if field in ns:
            defaults.append(field)
        elif defaults:
            raise TypeError(f"Non-default namedtuple field {field} cannot follow default field"
                            f"{'s' if len(defaults) > 1 else ''} {', '.join(defaults)}")
    for field in fields:
        if field.startswith("_"):
            raise ValueError(f"Field names cannot start with an underscore: {field!r}")
    signature = ", ".join(fields) + ("," if len(fields) == 1 else "")

    code = _new_code(len(fields))
    new = FunctionType(code.replace(co_varnames=("_cls",) + fields + code.co_varnames[len(fields) + 1:]),
                       globals(), "__new__", tuple(ns[f] for f in defaults))
    new.__qualname__ = f"{name}.__new__"
    new.__doc__ = f"Create new instance of {name}({signature})"
    new.__annotations__ = annotations = dict(types)

    body = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": f"{name}({signature})",
            "__slots__": (), "_fields": fields, "_field_defaults": {f: ns[f] for f in defaults},
            "__new__": new, **_named_tuple_methods(name, fields), "__match_args__": fields}
    for index, field in enumerate(fields):
        body[field] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
    body["__annotations__"] = annotations
    for key, value in ns.items():
        if key in _PROHIBITED:
            raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
        if key not in _NOT_COPIED and key not in types and not (key == "__doc__" and value is None):
            body[key] = value
    return type(name, (tuple,), body)
