"""The GTID model: parsing, binlog states, positions, the is-before predicate."""
import pytest
from hypothesis import given, strategies as st

from gtidx.errors import GtidSyntaxError, GtidxError
from gtidx.gtid import U32_MAX, U64_MAX, BinlogState, Gtid, Position

# -- Gtid ---------------------------------------------------------------------


def test_parse_and_format():
    g = Gtid.parse("0-1-100")
    assert g == Gtid(0, 1, 100)
    assert (g.domain, g.server, g.seq) == (0, 1, 100)
    assert str(g) == "0-1-100"
    assert str(Gtid.parse(f"{U32_MAX}-{U32_MAX}-{U64_MAX}")) == f"{U32_MAX}-{U32_MAX}-{U64_MAX}"


@pytest.mark.parametrize("text, why", [
    ("0-1-", "expected domain-server-seq"),
    ("a-b-c", "expected domain-server-seq"),
    ("0-1", "expected domain-server-seq"),
    ("0-1-2-3", "expected domain-server-seq"),
    ("", "expected domain-server-seq"),
    (" 0-1-100", "expected domain-server-seq"),
    ("0-1-100 ", "expected domain-server-seq"),
    ("0 -1-100", "expected domain-server-seq"),
    ("0-1-+5", "expected domain-server-seq"),
    ("-1-1-5", "expected domain-server-seq"),
    ("0-1-\u0661", "expected domain-server-seq"),      # Arabic-Indic digit one
    ("0-1-0", "seq_no 0"),
    (f"{U32_MAX + 1}-1-1", "domain id"),
    (f"0-{U32_MAX + 1}-1", "server id"),
    (f"0-1-{U64_MAX + 1}", "seq_no"),
])
def test_parse_rejects(text, why):
    with pytest.raises(GtidSyntaxError) as e:
        Gtid.parse(text)
    assert why in str(e.value)
    assert e.value.exit_code == 2
    assert "\n" not in str(e.value)


def test_parse_rejects_non_text():
    with pytest.raises(GtidSyntaxError):
        Gtid.parse(5)


gtids = st.builds(Gtid, st.integers(0, U32_MAX), st.integers(0, U32_MAX), st.integers(1, U64_MAX))


@given(gtids)
def test_gtid_round_trip(g):
    assert Gtid.parse(str(g)) == g


# -- Position -------------------------------------------------------------------


def test_position_parse_format_compare_as_sets():
    p = Position.parse("1-2-50,0-1-100")
    assert str(p) == "0-1-100,1-2-50"
    assert p == Position.parse("0-1-100, 1-2-50")
    assert p.get(1) == Gtid(1, 2, 50) and p.get(7) is None
    assert 0 in p and 2 not in p and len(p) == 2
    assert Position.parse("") == Position() and str(Position()) == ""


@pytest.mark.parametrize("text", ["0-1-100,0-2-5", "0-1-1,,1-1-1", "0-1-1,", "x"])
def test_position_rejects(text):
    with pytest.raises(GtidSyntaxError):
        Position.parse(text)


def test_position_repeated_domain_message():
    with pytest.raises(GtidSyntaxError, match="two GTIDs for domain 0"):
        Position.parse("0-1-100,0-2-5")


positions = st.lists(gtids, unique_by=lambda g: g.domain, max_size=8).map(Position)


@given(positions)
def test_position_round_trip(p):
    assert Position.parse(str(p)) == p


# -- BinlogState --------------------------------------------------------------------


def test_state_keeps_latest_per_server_and_last_per_domain():
    s = BinlogState()
    for g in ["0-1-1", "0-2-2", "0-1-3", "1-5-7"]:
        s.update([Gtid.parse(g)])
    assert s.get(0, 1) == 3 and s.get(0, 2) == 2 and s.get(1, 5) == 7 and s.get(2, 1) is None
    assert s.last(0) == Gtid(0, 1, 3)
    # MariaDB order: per domain the other servers, then the domain's last GTID.
    assert str(s) == "0-2-2,0-1-3,1-5-7"
    assert str(s.position()) == "0-1-3,1-5-7"
    assert len(s) == 3


def test_state_seq_going_backwards_is_recorded_as_logged():
    # gtid_strict_mode=OFF lets a domain go backwards; the state holds what
    # was logged last, not the maximum (the nonmono fixtures prove the server agrees).
    s = BinlogState.parse("5-1-100,5-1-50")
    assert s.get(5, 1) == 50 and str(s.position()) == "5-1-50"


def test_state_parse_takes_listed_last_as_domain_last():
    s = BinlogState.parse("0-1-10,0-2-3")
    assert s.last(0) == Gtid(0, 2, 3)
    assert BinlogState.parse("0-2-3,0-1-10").last(0) == Gtid(0, 1, 10)
    assert BinlogState.parse("0-1-10,0-2-3") != BinlogState.parse("0-2-3,0-1-10")


def test_state_copy_is_independent():
    a = BinlogState.parse("0-1-1")
    b = a.copy()
    b.apply(0, 1, 2)
    assert a.get(0, 1) == 1 and b.get(0, 1) == 2


# A state built by logging GTIDs in order, like a binlog.
logs = st.lists(st.builds(Gtid, st.integers(0, 4), st.integers(1, 3), st.integers(1, 50)), max_size=40)


@given(logs)
def test_state_text_round_trip(log):
    s = BinlogState(log)
    assert BinlogState.parse(str(s)) == s
    assert Position.parse(str(s.position())) == s.position()


@given(logs)
def test_every_domain_last_is_listed_last(log):
    s = BinlogState(log)
    listed = s.gtids()
    for d in s.domains():
        assert [g for g in listed if g.domain == d][-1] == s.last(d)


# -- is_before: the spec's predicate --------------------------------------------------


@pytest.mark.parametrize("state, pos, before", [
    ("", "", True),
    ("", "0-1-5", True),
    ("0-1-4", "0-1-5", True),           # seq below the position's
    ("0-1-5", "0-1-5", True),           # equal and the domain's last
    ("0-1-6", "0-1-5", False),          # past the position
    ("0-1-5,0-2-9", "0-1-5", False),    # equal but not the domain's last
    ("0-2-9,0-1-5", "0-1-5", True),     # other server's seq does not count
    ("0-1-5,1-1-1", "0-1-5", False),    # a domain the position lacks
    ("0-1-5", "0-1-5,1-1-1", True),     # a domain the state lacks
    ("0-1-5", "0-2-3", True),           # (D,S) absent from the state
])
def test_is_before(state, pos, before):
    assert BinlogState.parse(state).is_before(Position.parse(pos)) is before


@given(logs)
def test_a_state_is_before_its_own_position(log):
    s = BinlogState(log)
    assert s.is_before(s.position())


@given(logs, st.builds(Gtid, st.integers(0, 4), st.integers(1, 3), st.integers(1, 50)))
def test_logging_a_newer_gtid_moves_past_the_position(log, extra):
    # A replica at the state's own position has everything up to here: any
    # GTID that adds a (domain, server) pair or raises its seq is past it.
    s = BinlogState(log)
    old_seq = s.get(extra.domain, extra.server)
    grown = s.copy()
    grown.apply(*extra)
    if old_seq is None or extra.seq > old_seq:
        assert not grown.is_before(s.position())
    elif extra.seq < old_seq and s.last(extra.domain) == Gtid(extra.domain, extra.server, old_seq):
        # seq going backwards (strict mode off) keeps the state "before"
        assert grown.is_before(s.position())


def test_errors_are_gtidx_errors():
    with pytest.raises(GtidxError):
        Gtid.parse("nope")


def _brute_force_entries(log) -> list[tuple]:
    """A state's entries in MariaDB order, straight from the log: per (domain,
    server) the seq logged last; per domain, the servers other than the one
    that logged last ascending, then that one."""
    seq, last = {}, {}
    for g in log:
        seq[(g.domain, g.server)] = g.seq
        last[g.domain] = g.server
    out = []
    for d in sorted(last):
        out += [(d, s, seq[(d, s)]) for s in sorted(s for dd, s in seq if dd == d and s != last[d])]
        out.append((d, last[d], seq[(d, last[d])]))
    return out


@given(logs)
def test_state_entries_text_and_position_equal_brute_force(log):
    # entries() owns the order; str(), iter() and position() are built on the
    # shortest paths (no Gtid per entry for the text): all must agree with
    # each other and with the log
    state = BinlogState(log)
    want = _brute_force_entries(log)
    assert state.entries() == want
    assert list(state) == [Gtid(*e) for e in want]
    assert str(state) == ",".join(f"{d}-{s}-{n}" for d, s, n in want)
    last = {d: (d, s, n) for d, s, n in want}          # each domain's last entry is listed last
    pos = state.position()
    assert pos == Position(Gtid(*e) for e in last.values())
    assert str(pos) == ",".join(f"{d}-{s}-{n}" for d, s, n in sorted(last.values()))
    assert len(pos) == len(last) and all(d in pos for d in last)


def test_gtid_module_docstring_examples_run():
    import doctest

    import gtidx.gtid
    result = doctest.testmod(gtidx.gtid)
    assert result.attempted >= 1 and result.failed == 0
