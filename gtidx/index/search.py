"""Search one index: the key walk of a node and the step shared by the root
descent and the leaf search, as the server's gtid_index.cc splits its
reader (``Gtid_index_reader``): pure functions over a ``format.NodeCursor``.

``node_keys`` is every loop over a node's keys: the format's "next key or
stop" rule and the checks on each key (nothing trusts a number read from
the file). ``accepted`` applies keys to a state while a predicate holds.
``index.reader`` reads the pages and nodes these walk, and drives the
descent with them.
"""
from __future__ import annotations

from typing import Callable, Iterator

from . import format as fmt
from ..errors import CorruptIndexError
from ..gtid import BinlogState


def corrupt(message: str, path, page: int | None = None, incomplete: bool = False) -> CorruptIndexError:
    """The CorruptIndexError for damage in the index at ``path`` (on
    ``page``); ``incomplete``: the index is still being written or was cut
    short, not damaged (a lookup scans either way)."""
    e = CorruptIndexError(message, path=path, page=page)
    e.incomplete = incomplete
    return e


def child_pointer(cur: fmt.NodeCursor, page: int, path) -> int:
    """The child pointer at ``cur`` in the interior node at ``page``.

    It must point back into the file, before ``page``: a child is always
    written before its parent (append-only, bottom-up), so every descent
    ends. Raises CorruptIndexError otherwise, or when the node ends first.
    """
    child = cur.child()
    if child is None:
        raise corrupt("interior node ends without its child pointer", path, page)
    if not 1 <= child < page:
        raise corrupt(f"child pointer {child} does not point back into the file", path, page)
    return child


def node_keys(cur: fmt.NodeCursor, page: int, path, lo: int | None = None, hi: int | None = None,
              children: bool = False, ordered: bool = True,
              codec: fmt.KeyCodec = fmt.MARIADB) -> Iterator[tuple[int, list, int | None]]:
    """Iterate the keys of the node at ``page``, from ``cur`` on, left to right.

    Yields ``(offset, gtids, child)``: the key's binlog offset, its GTIDs as
    stored, and in an interior node (``children=True``) the child pointer
    right of the key, else None. Stops at the end of the node (a zero GTID
    count, or no room left for a key header): the format's "next key or
    stop" rule, in one place.

    Every key is checked before it is yielded: its GTID count against the
    bytes left in the node (nothing is allocated by a count read from the
    file), and, with ``ordered``, its offset against the range the descent
    allows: above the previous key (the node's first key: above ``lo``, the
    separator left of the node) and below ``hi`` (the separator right of
    it); None is no bound. Raises CorruptIndexError, with ``page``, on the
    first broken rule. ``codec`` reads a key's value (``KeyCodec.read``;
    bytes that do not decode are corrupt too).

    Runtime complexity: O(k) for a node of k keys, each GTID read once.
    """
    prev = lo
    next_key = cur.key
    read = codec.read
    while True:
        head = next_key()
        if head is None:
            return
        count, offset = head
        try:
            gtids = read(cur, count)
        except ValueError as e:
            raise corrupt(f"key at offset {offset} does not decode: {e}", path, page) from None
        if gtids is None:
            raise corrupt(f"key claims {count} units, more than its node holds", path, page)
        if ordered:
            if prev is not None and offset <= prev:
                raise corrupt(f"key offsets out of order ({offset} after {prev})", path, page)
            if hi is not None and offset >= hi:
                raise corrupt(f"key offset {offset} is not below the next separator ({hi})", path, page)
            prev = offset
        yield offset, gtids, child_pointer(cur, page, path) if children else None


def accepted(keys: Iterator[tuple[int, list, int | None]], state: BinlogState,
             accept: Callable[[int, BinlogState | None], bool], needs_state: bool, states: bool = True,
             codec: fmt.KeyCodec = fmt.MARIADB):
    """Apply ``keys`` to ``state`` while ``accept(offset, state with the
    key)`` holds: the step shared by the root descent and the leaf search.

    Returns ``(state, last, child, stop)``: the state after the accepted
    keys, the last accepted key's offset and the child pointer right of it
    (None: no key was accepted) and the first rejected key's offset (None:
    every key was accepted). With ``needs_state=False`` ``accept`` gets
    None for the state, a rejected key costs no state work, and ``state``
    is updated in place once, with the accepted keys' GTIDs in order
    (not at all with ``states=False``: the caller wants offsets only);
    otherwise ``accept`` gets a new state it may keep, which becomes
    ``state``.

    Runtime complexity: O(k) calls of ``accept`` for k keys, plus a state
    copy per key when ``needs_state``.
    """
    last = child = stop = None
    if needs_state:
        for offset, gtids, right in keys:
            trial = state.copy().update(gtids)
            if not accept(offset, trial):
                return state, last, child, offset
            state, last, child = trial, offset, right
        return state, last, child, None
    accepted = []               # applied at the end, in order: one update call
    for offset, gtids, right in keys:
        if not accept(offset, None):
            stop = offset
            break
        accepted.append(gtids)
        last, child = offset, right
    if states:
        codec.apply_all(state, accepted)
    return state, last, child, stop
