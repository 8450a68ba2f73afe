"""A growing binlog walked look after look by the record policy a tail uses:
where a look ends inside a group, the next resumes there (``walk.OpenGroup``)
instead of walking the group from its start again. Its answers (the
records, and how far each look walked) equal those of the walk that always
starts from the last complete group, at any cut points of real binlogs
(MariaDB 10.11 and 11.8 fixtures: big transactions, XA, several domains),
a rewritten tail, and the closed file at the end."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES, growing_copy
from gtidx.binlog import walk
from gtidx.binlog.mariadb import Binlog
from gtidx.index.writer import RecordPolicy

SOURCES = [FIXTURES / "mariadb-10.11" / "bigtrx" / "master-bin.000004",
           FIXTURES / "mariadb-10.11" / "xa" / "master-bin.000006",
           FIXTURES / "mariadb-11.8" / "mixed" / "master-bin.000002",
           FIXTURES / "mariadb-11.8" / "manydomains" / "master-bin.000025"]
DATA = [p.read_bytes() for p in SOURCES]
TMP = Path(tempfile.mkdtemp(prefix="gtidx-open-group-"))
RESUMED = []


def _looks(data: bytes, cuts: list, span: int, rewrite: int | None) -> list:
    """Each look's (records, walked) for the policy that resumes inside an
    open group and for the one that never does."""
    path = TMP / "master-bin.000001"
    out = {True: [], False: []}
    policies = {True: RecordPolicy(span), False: RecordPolicy(span)}
    for i, cut in enumerate(cuts + [len(data)]):
        body = growing_copy(data, cut) if cut < len(data) else data
        if rewrite is not None and i == rewrite and cut < len(data):
            # the tail rewritten under the walk (a crash, then other events): never resumed into
            body = body[:len(body) // 2] + bytes(b ^ 0x5A for b in body[len(body) // 2:])
        path.write_bytes(body)
        for resume, policy in policies.items():
            with Binlog(path) as b:
                if i == 0:
                    policy.first(b)
                if not resume:
                    policy.carry = None
                elif policy.carry.start >= 0:
                    RESUMED.append(cut)
                try:
                    looked = [(end, sorted(gtids)) for end, gtids in policy.advance(b)]
                except Exception as e:        # noqa: BLE001 - the same failure, on both sides
                    looked = repr(e)
                    policy.resume(policy.walked, [policy.previous or policy.walked])
            out[resume].append((looked, policy.walked))
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(0, len(SOURCES) - 1), st.lists(st.floats(0.001, 0.999), min_size=1, max_size=12),
       st.sampled_from([1, 4096, 65536]), st.one_of(st.none(), st.integers(0, 11)))
def test_resuming_inside_an_open_group_answers_as_walking_it_again(which, fractions, span, rewrite):
    data = DATA[which]
    cuts = sorted({2048 + int(f * (len(data) - 2048)) for f in fractions})      # past the preamble
    out = _looks(data, cuts, span, rewrite)
    assert out[True] == out[False]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_the_resume_is_taken(monkeypatch, compiled):
    """Not a hollow property: looks every 2 KiB through a big transaction
    resume inside it (and still answer as walking it again), with the
    compiled skip and without it."""
    if not compiled:
        monkeypatch.setattr(walk, "_skip", None)
    RESUMED.clear()
    data = DATA[0]
    out = _looks(data, list(range(4096, len(data), 2048)), 65536, None)
    assert out[True] == out[False]
    assert len(RESUMED) > 100
