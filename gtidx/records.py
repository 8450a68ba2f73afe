"""``record``: a class statement made into a named tuple, as ``typing.NamedTuple`` makes it.

    @record
    class Occurrence:
        file: str
        start: int
        end: int = 0

is the class ``class Occurrence(NamedTuple): ...`` gives (a ``collections.namedtuple``
with the fields, defaults, methods, properties and docstring of the class
statement), less the part that costs: ``typing.NamedTuple`` turns every field's
annotation into a ``ForwardRef``, compiling it, and that made the named tuples
a lookup imports cost a tenth of the CLI's start-up (issue 16). Here the
annotations stay the text they are (``from __future__ import annotations``).
"""
from __future__ import annotations

import collections

# typing.NamedTuple's rules: these may not be defined by the class, and these are not copied
_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                         "_make", "_replace", "_asdict", "_source"})
_NOT_COPIED = frozenset({"__module__", "__name__", "__annotations__", "__dict__", "__weakref__"})


def record(cls: type) -> type:
    ns = cls.__dict__
    types = ns.get("__annotations__", {})
    defaults = []
    for name in types:
        if name in ns:
            defaults.append(name)
        elif defaults:
            raise TypeError(f"Non-default namedtuple field {name} cannot follow default field"
                            f"{'s' if len(defaults) > 1 else ''} {', '.join(defaults)}")
    tpl = collections.namedtuple(cls.__name__, list(types), defaults=[ns[n] for n in defaults],
                                 module=cls.__module__)
    tpl.__annotations__ = dict(types)
    tpl.__qualname__ = cls.__qualname__
    for key, value in ns.items():
        if key in _PROHIBITED:
            raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
        if key not in _NOT_COPIED and key not in types and not (key == "__doc__" and value is None):
            setattr(tpl, key, value)
    return tpl
