"""What a JSON value read from disk must be, as checks (value -> bool) that
compose: a catalog (``gtidx.catalog``, ``gtidx.catalog_mysql``) is read
with one check per key, so that nothing of the wrong kind (a string where a
number is, a negative size, a float) reaches the code that uses it."""
from __future__ import annotations

U32, U64 = (1 << 32) - 1, (1 << 64) - 1


def is_str(v) -> bool:
    return type(v) is str


def is_bool(v) -> bool:
    return type(v) is bool


def nat(top: int = U64):
    """An int from 0 to ``top`` (not a bool, not a float)."""
    return lambda v: type(v) is int and 0 <= v <= top


def parsed_by(parse, error: type):
    """A str that ``parse`` reads without raising ``error``."""
    def check(v) -> bool:
        if type(v) is not str:
            return False
        try:
            parse(v)
        except error:
            return False
        return True
    return check


def optional(check):
    return lambda v: v is None or check(v)


def list_of(check):
    return lambda v: type(v) is list and all(check(x) for x in v)


def row(*checks):
    """A list of exactly ``len(checks)`` values, each passing its check."""
    return lambda v: type(v) is list and len(v) == len(checks) and all(c(x) for c, x in zip(checks, v))


def obj(fields: dict, maybe: dict | None = None):
    """A dict with every key of ``fields`` and maybe those of ``maybe``, each passing its check."""
    maybe = maybe or {}
    return lambda v: type(v) is dict and all(k in v and c(v[k]) for k, c in fields.items()) and \
        all(c(v[k]) for k, c in maybe.items() if k in v)


__all__ = ["U32", "U64", "is_str", "is_bool", "nat", "parsed_by", "optional", "list_of", "row", "obj"]
