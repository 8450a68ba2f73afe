"""Where index records go: ``RecordPolicy.group`` (the rule, one event group
at a time) against the fused walk the build and the tail use
(``RecordPolicy.advance`` over ``Binlog.group_batches``), on every fixture
binlog, and the ``LatestGtids`` type every record is made of."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES, growing_copy
from gtidx.binlog.mariadb import Binlog
from gtidx.gtid import BinlogState, LatestGtids
from gtidx.index.build import server_records
from gtidx.tail import IncrementalIndex
from gtidx.index.writer import RecordPolicy

# Every fixture binlog gtidx can read (the encrypted ones cannot be walked).
BINLOGS = sorted(p for p in FIXTURES.glob("mariadb-*/*/master-bin.*")
                 if p.name[-6:].isdigit() and p.parent.name != "encrypted")
SPANS = [1, 2048, 65536]


def _id(p):
    return f"{p.parent.parent.name}/{p.parent.name}/{p.name}"


def per_group(b: Binlog, span: int, max_offset: int | None = None) -> list:
    """The rule applied group by group: the reference."""
    policy = RecordPolicy(span) if max_offset is None else RecordPolicy(span, max_offset=max_offset)
    records = [policy.first(b)]
    for _, end, (_, server, seq, domain, _) in b.group_spans():
        rec = policy.group(end, domain, server, seq)
        if rec is not None:
            records.append(rec)
    return records


def test_fixtures_are_all_here():
    assert len(BINLOGS) >= 28 and {p.parent.parent.name for p in BINLOGS} == {"mariadb-10.11", "mariadb-11.8"}


@pytest.mark.parametrize("path", BINLOGS, ids=_id)
def test_fused_walk_places_records_as_the_rule(path):
    with Binlog(path) as b:
        for span in SPANS:
            expected = per_group(b, span)
            assert len(expected) > 1 or b.size < 65536 + span, "a fixture with a single record proves little"
            assert server_records(b, span) == expected, span
            # the 4 GiB cap, moved into the file: no record past it, for the build and the tail
            cap = b.size // 2
            capped = per_group(b, span, max_offset=cap)
            assert all(o <= cap for o, _ in capped[1:])
            for follow in (False, True):
                policy = RecordPolicy(span, max_offset=cap)
                assert [policy.first(b), *policy.advance(b, follow=follow)] == capped, (span, follow)


@pytest.mark.parametrize("path", BINLOGS, ids=_id)
def test_fused_walk_in_steps_over_a_growing_binlog(path, tmp_path):
    """The tail's path: the same records when the binlog is read in several
    snapshots, cut anywhere (mid-event, mid-group), as a server writes it."""
    data = path.read_bytes()
    rnd = random.Random(len(data))
    cuts = sorted(rnd.sample(range(1, len(data)), min(12, len(data) - 1)))
    for span in SPANS:
        with Binlog(path) as whole:
            expected = per_group(whole, span)
        (tmp_path / str(span)).mkdir()
        copy = tmp_path / str(span) / path.name
        policy, got = RecordPolicy(span), []
        inc = IncrementalIndex(str(copy), page_size=4096, span_min=span)
        for cut in cuts + [len(data)]:
            if cut < expected[0][0]:
                continue               # the tail starts once the preamble is complete
            copy.write_bytes(growing_copy(data, cut) if cut < len(data) else data)
            with Binlog(copy) as b:
                if not got:
                    got.append(policy.first(b))
                    inc.start(b)
                got.extend(policy.advance(b))
                inc.advance(b)
                assert policy.walked <= b.size
        assert got == expected, span
        assert inc.offsets == [o for o, _ in expected], span
        inc.close()


# -- LatestGtids --------------------------------------------------------------------------------

def brute(gtids) -> list:
    """Latest seq per (domain, server), each pair placed where it was last listed."""
    out: list = []
    for d, s, q in gtids:
        out = [g for g in out if (g[0], g[1]) != (d, s)] + [(d, s, q)]
    return out


gtid_lists = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 3), st.integers(1, 50)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(gtid_lists, max_size=6))
def test_latest_gtids_against_brute_force(lists):
    flat = [g for gtids in lists for g in gtids]
    one = LatestGtids()
    for d, s, q in flat:
        one.add(d, s, q)
    assert one.items() == brute(flat)
    bulk = LatestGtids()
    for gtids in lists:
        bulk.update(gtids)
    assert bulk == one
    rows = LatestGtids()
    for gtids in lists:    # GTID_HEAD-like rows: (timestamp, server, seq, domain, flags2)
        rows.add_rows([(0, s, q, d, 0) for d, s, q in gtids], 3, 1, 2)
    assert rows == one
    merged = LatestGtids()
    for gtids in lists:
        merged.merge(LatestGtids(gtids))
    assert merged == one
    assert LatestGtids.joined([brute(g) for g in lists]) == brute(flat)     # records merged by coarsen
    # the same rule per domain: a BinlogState built from it is the state of the whole list
    assert BinlogState(one.items()) == BinlogState(flat)
    assert one.take() == brute(flat) and not one
