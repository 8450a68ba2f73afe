"""gtidx mutation fuzzer: damaged `.idx` files and damaged binlogs, every fixture.

    tools/fuzz [--seed 1] [--runs N | --seconds S] [--json] [--only SUBSTR] [--quiet]

Each input is one fixture binlog (every readable one in fixtures/, round
robin) with one fault injected into its index or into the binlog itself,
then a batch of lookups through ``gtidx.api`` (state_at, locate,
replica_start), each checked:

* damaged `.idx`, intact binlog: the answer must be exactly the answer of a
  scan of the intact binlog (oracle.json for state_at, the api without an
  index for locate / replica_start), never a GtidxError (the binlog is fine:
  a bad index only means a fallback to scanning). Faults: bit flips,
  truncations (anywhere / at a page boundary), byte splices, whole-page
  splices (pages with valid CRCs in the wrong place), garbage tails, and
  "resealed" faults (a structural field: flags, key count, child pointer or
  key offset overwritten with a hostile value, then the page's CRC fixed, so
  only the reader's structure checks stand between it and the search). A
  resealed fault that changes a key's *content* (an offset or a GTID) into
  another well-formed value is undetectable in principle (the server itself
  would trust it, and a lookup checks only the pages on its path); answer
  mismatches after a resealed fault, and after any fault that leaves an
  index passing the full structural check (`IndexReader.check`) with other
  records, are counted apart ("forged-content"): they are forgeries, not
  damage. Likewise counted apart ("continuation-page"): answer mismatches
  after a whole-page copy or swap between two continuation pages (IS_CONT):
  such a page carries no link to its node, so a lookup that reads only its
  own path cannot tell (the full check, `gtidx verify` / `build`, can when
  a separator and its leaf disagree). Also not bytes but the file itself:
  FILE.idx a FIFO, or a symlink to another binlog's index, to a directory,
  to /dev/zero or to nowhere (reading through a link is fine; the answer
  must still be the scan's). Crashes and hangs count for every kind.
* damaged binlog: an answer is right only when it equals a brute-force scan
  of the damaged bytes (an independent event walk written here), or when it
  equals the intact binlog's answer AND the lookup used an index built from
  the intact binlog before the damage (an index vouches, by its CRCs, for
  the binlog as it was; a silent in-place change in the middle of a binlog
  that keeps its size and its first and last 64 KiB cannot be seen without
  reading the whole file). A GtidxError is always acceptable for a damaged
  binlog. Faults: bit flips, truncations, splices, u32 overwrites (event
  lengths), IN_USE flag set, the binlog a FIFO (no answer can be right:
  only "not found" or a GtidxError).

Each input runs under a time limit (a hang is counted when it is exceeded)
and the process under an address-space limit (an allocation sized by an
unchecked length field raises MemoryError: counted as a crash). Exit code 1
when there is any wrong answer, crash or hang.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from gtidx import api
from gtidx.index import format as fmt
from gtidx.errors import GtidxError, NotFoundError
from gtidx.gtid import BinlogState, Position
from gtidx.index.build import build_index
from gtidx.index.files import XATTR

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
IDX_FAULTS = ("idx_flip", "idx_truncate", "idx_truncate_page", "idx_splice", "idx_page_splice",
              "idx_garbage_tail", "idx_reseal", "idx_delete", "idx_fifo", "idx_link")
BINLOG_FAULTS = ("bin_flip", "bin_truncate", "bin_splice", "bin_u32", "bin_in_use", "bin_fifo")
# not bytes: the file itself is replaced (run_input makes these)
FILE_FAULTS = ("idx_fifo", "idx_link", "bin_fifo")
FAULTS = IDX_FAULTS + BINLOG_FAULTS
HOSTILE_U32 = (0, 1, 2, 0xFFFFFFFF, 0x7FFFFFFF, 0x10000000, 0xFFFF, 18, 19)


class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang()


# -- fixtures and their baselines ------------------------------------------------------

def fixture_files(only: str | None = None) -> list[tuple[Path, dict]]:
    out = []
    for d in sorted(p.parent for p in FIXTURES.glob("mariadb-*/*/oracle.json")):
        oracle = json.loads((d / "oracle.json").read_text())
        for f in oracle["files"]:
            p = d / f["name"]
            ident = f"{d.parent.name}/{d.name}/{p.name}"
            if only and only not in ident:
                continue
            out.append((p, f))
    return out


def fixture_id(p: Path) -> str:
    return f"{p.parent.parent.name}/{p.parent.name}/{p.name}"


class Fixture:
    """One fixture binlog copied to a work dir, with its clean answers."""

    def __init__(self, src: Path, oracle: dict, work: Path, rnd: random.Random):
        self.src = src
        self.id = fixture_id(src)
        self.data = src.read_bytes()
        self.oracle_pos = [(o, None if a is None else Position.parse(a)) for o, a in oracle["pos"]]
        self.encrypted = src.parent.name == "encrypted"
        self.server_idx = src.with_name(src.name + ".idx")
        self.server_idx_bytes = self.server_idx.read_bytes() if self.server_idx.exists() else None
        self.dir = work / self.id.replace("/", "_")
        self.dir.mkdir(parents=True)
        self.binlog = self.dir / src.name
        self.binlog.write_bytes(self.data)
        # gtidx indexes of the intact binlog, a few layouts (small pages: deep trees)
        self.indexes: dict[str, tuple[bytes, bytes | None]] = {}
        if not self.encrypted:
            for ps, span in ((64, 1), (256, 2048), (4096, 65536)):
                out = self.dir / f"clean-{ps}.idx"
                build_index(self.binlog, out=str(out), page_size=ps, span_min=span, max_ratio=None,
                            force=True)
                self.indexes[f"gtidx-{ps}"] = (out.read_bytes(), _getxattr(out))
                out.unlink()
            if self.server_idx_bytes is not None:
                self.indexes["server"] = (self.server_idx_bytes, None)
            # a valid, fingerprinted index of this binlog outside its name: the
            # target of another fixture's idx_link (an index of another binlog)
            self.own_index = self.dir / "own-64.idx"
            raw, xattr = self.indexes["gtidx-64"]
            self.own_index.write_bytes(raw)
            if xattr:
                os.setxattr(self.own_index, XATTR, xattr)
        self.neighbour_index: Path | None = None
        # clean answers of the api without an index (locate, replica_start)
        groups = [g for g in oracle.get("groups", [])]
        self.gtids = sorted({g[0] for g in groups})
        self.locate_base = {}
        self.replica_base = {}
        if not self.encrypted:
            with api.BinlogSeries([str(self.binlog)], use_index=False) as logs:
                for g in rnd.sample(self.gtids, min(40, len(self.gtids))):
                    self.locate_base[g] = _locate(logs, g)
                for g in rnd.sample(self.gtids, min(10, len(self.gtids))):
                    self.replica_base[g] = _replica(logs, g)


def _getxattr(p) -> bytes | None:
    try:
        return os.getxattr(p, XATTR)
    except OSError:
        return None


def _via(logs, binlog) -> str:
    """After a lookup that answered "not found": did it come through the index?"""
    f = logs._open.get(str(binlog))
    return "index" if f is not None and f.reader is not None else "scan"


def _locate(logs, g):
    try:
        loc = logs.locate(g)
        return (str(loc.gtid), loc.start, loc.end, loc.resume)
    except NotFoundError:
        return None


def _replica(logs, g):
    """The whole replica start but ``via``: an index, however damaged, never
    changes it (file, offset, state, skip, first group sent)."""
    try:
        rs = logs.replica_start(g)
        first = rs.first
        return (rs.file, rs.offset, str(rs.state), str(rs.skip),
                None if first is None else (str(first.gtid), first.file, first.start, first.end))
    except NotFoundError:
        return None


# -- mutations ------------------------------------------------------------------------------

def mutate_idx(kind: str, data: bytes, rnd: random.Random) -> tuple[bytes | None, str]:
    """(damaged bytes or None to delete the file, detail)."""
    d = bytearray(data)
    n = len(d)
    ps = struct.unpack_from("<I", d, 8)[0] if n >= 12 else 4096
    npages = n // ps if ps else 0
    if kind == "idx_flip":
        k = rnd.choice((1, 1, 2, 3, 8))
        for _ in range(k):
            d[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
        return bytes(d), f"{k} bit flips"
    if kind == "idx_truncate":
        cut = rnd.randrange(n)
        return bytes(d[:cut]), f"cut at {cut}"
    if kind == "idx_truncate_page":
        cut = ps * rnd.randrange(npages) if npages else 0
        return bytes(d[:cut]), f"cut at page {cut // ps if ps else 0}"
    if kind == "idx_splice":
        a, b, ln = rnd.randrange(n), rnd.randrange(n), rnd.randrange(1, 300)
        d[b:b + ln] = d[a:a + ln]
        return bytes(d[:max(b + ln, n)]), f"copy {ln} bytes {a}->{b}"
    if kind == "idx_page_splice":
        if npages < 2:
            return bytes(d + d[-ps:]), "duplicate the only page"
        how = rnd.randrange(4)
        i, j = rnd.sample(range(npages), 2)
        pages = [bytes(d[p * ps:(p + 1) * ps]) for p in range(npages)]
        cont = " [continuation pages]" if continuation_only(bytes(d), (i + 1, j + 1)) else ""
        if how == 0:
            pages[j] = pages[i]
            detail = f"page {i + 1} over page {j + 1}{cont}"
        elif how == 1:
            pages[i], pages[j] = pages[j], pages[i]
            detail = f"swap pages {i + 1} and {j + 1}{cont}"
        elif how == 2:
            pages.insert(j, pages[i])
            detail = f"insert a copy of page {i + 1} before {j + 1}"
        else:
            del pages[i]
            detail = f"delete page {i + 1}"
        return b"".join(pages), detail
    if kind == "idx_garbage_tail":
        extra = rnd.choice((rnd.randbytes(rnd.randrange(1, 200)), rnd.randbytes(ps), bytes(ps)))
        return bytes(d) + extra, f"{len(extra)} bytes appended"
    if kind == "idx_reseal":
        return reseal(d, ps, npages, rnd)
    if kind == "idx_delete":
        return None, "deleted"
    raise ValueError(kind)


def plant_idx(kind: str, fx: "Fixture", idx: Path, rnd: random.Random) -> str:
    """A FIFO or a symlink as FILE.idx."""
    if kind == "idx_fifo":
        os.mkfifo(idx)
        return "FIFO as the index"
    choices = [("another binlog's index", fx.neighbour_index), ("a directory", fx.dir),
               ("/dev/zero", Path("/dev/zero")), ("/dev/null", Path("/dev/null")),
               ("nowhere", fx.dir / "no-such-file")]
    what, target = rnd.choice([c for c in choices if c[1] is not None])
    os.symlink(target, idx)
    return f"symlink to {what}"


def continuation_only(data: bytes, pages) -> bool:
    """Are all these pages continuation pages (IS_CONT) of nodes? Such a page
    holds nothing but the middle of a node's unit stream (GTIDs, mostly): one
    moved or copied onto another is well-formed, CRC and all, and nothing in
    the format ties it to its node; only a comparison with the binlog or a
    full tree check (separators against the leaves that repeat them) can see it."""
    try:
        ps = struct.unpack_from("<I", data, 8)[0]
        return all(data[(p - 1) * ps + fmt.flags_at(p)] & fmt.IS_CONT for p in pages)
    except (struct.error, IndexError):
        return False


def reseal(d: bytearray, ps: int, npages: int, rnd: random.Random) -> tuple[bytes, str]:
    """Overwrite a structural field of a page with a hostile value and fix its CRC."""
    if npages == 0:
        return bytes(d), "no page"
    page = rnd.randrange(1, npages + 1)
    base = (page - 1) * ps
    start = base + fmt.payload_start(page)
    end = base + ps - fmt.CHECKSUM_SIZE
    what = rnd.choice(("flags", "count", "child", "offset", "u32"))
    if what == "flags":
        d[base + fmt.flags_at(page)] = rnd.choice((0, fmt.IS_LEAF, fmt.IS_CONT, fmt.LAST, fmt.ROOT,
                                                   fmt.ROOT | fmt.LAST, fmt.ROOT | fmt.LAST | fmt.IS_CONT,
                                                   fmt.IS_LEAF | fmt.LAST, rnd.randrange(256)))
    else:
        # a u32 at a 4-aligned payload position: key count, offset, child pointer or GTID part
        pos = start + 4 * rnd.randrange(max(1, (end - start) // 4))
        if what == "count":
            val = rnd.choice((0xFFFFFFFF, 0x7FFFFFFF, 1 << 24, ps, ps // 16 + 2))
        elif what == "child":
            val = rnd.choice((0, page, page + 1, npages, npages + 1, 0xFFFFFFFF, 1))
        elif what == "offset":
            val = rnd.choice((0, 4, 0xFFFFFFFF, rnd.randrange(1 << 22)))
        else:
            val = rnd.choice(HOSTILE_U32)
        struct.pack_into("<I", d, pos, val)
        what = f"{what}={val:#x} at {pos - base}"
    page_bytes = bytearray(d[base:base + ps])
    fmt.seal(page_bytes)
    d[base:base + ps] = page_bytes
    return bytes(d), f"page {page}: {what}, resealed"


def mutate_binlog(kind: str, data: bytes, rnd: random.Random) -> tuple[bytes, str]:
    d = bytearray(data)
    n = len(d)
    if kind == "bin_flip":
        k = rnd.choice((1, 1, 2, 4))
        for _ in range(k):
            d[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
        return bytes(d), f"{k} bit flips"
    if kind == "bin_truncate":
        cut = rnd.randrange(n)
        return bytes(d[:cut]), f"cut at {cut}"
    if kind == "bin_splice":
        a, b, ln = rnd.randrange(n), rnd.randrange(n), rnd.randrange(1, 400)
        d[b:b + ln] = d[a:a + ln]
        return bytes(d), f"copy {ln} bytes {a}->{b}"
    if kind == "bin_u32":
        pos = rnd.randrange(max(1, n - 3))
        val = rnd.choice(HOSTILE_U32)
        struct.pack_into("<I", d, pos, val)
        return bytes(d), f"u32 {val:#x} at {pos}"
    if kind == "bin_in_use":
        if n > 21:
            d[21] |= 1
        cut = rnd.randrange(n)
        return bytes(d[:cut]), f"IN_USE set, cut at {cut}"
    raise ValueError(kind)


# -- brute force: an independent event walk of (damaged) binlog bytes ------------------

def brute_positions(data: bytes, offsets: list[int]) -> dict[int, object]:
    """For each offset: the Position BINLOG_GTID_POS semantics give for these
    bytes (GTID_LIST state plus every complete GTID event before it), None
    when the offset is not an event boundary (inside an event, or past the
    end), or "?" when the event chain breaks before it (an impossible event
    length, an unreadable GTID_LIST or GTID event): there only an error is
    right, any answer would be a guess."""
    n = len(data)
    want = sorted(set(offsets))
    out: dict[int, object] = {o: None for o in want if o > n}
    want = [o for o in want if o <= n]
    if n < 4 + 19 or data[:4] != b"\xfebin":
        return {**out, **{o: "?" for o in want}}
    etype, fde_len = data[8], struct.unpack_from("<I", data, 13)[0]
    if etype != 15 or fde_len < 19 + 57 or 4 + fde_len > n:
        return {**out, **{o: "?" for o in want}}
    crc = 4 if fde_len >= 19 + 57 + 5 and data[4 + fde_len - 5] == 1 else 0
    # preamble: events up to a GTID_LIST or the first GTID event
    start = BinlogState()
    off = 4 + fde_len
    boundaries = [4, off]
    broken = None          # the chain breaks at this offset
    while off + 19 <= n:
        t, ln = data[off + 4], struct.unpack_from("<I", data, off + 9)[0]
        if ln < 19:
            broken = off
            break
        if off + ln > n or t == 162:
            break
        if t == 163:
            body = data[off + 19:off + ln - crc]
            cnt = struct.unpack_from("<I", body, 0)[0] & 0x0FFFFFFF if len(body) >= 4 else None
            if cnt is None or 4 + 16 * cnt > len(body):
                return {**out, **{o: "?" for o in want}}
            start = BinlogState([struct.unpack_from("<IIQ", body, 4 + 16 * i) for i in range(cnt)])
            off += ln
            boundaries.append(off)
            break
        off += ln
        boundaries.append(off)
    body_start = off
    state = start.copy()
    for o in want:
        if o <= 4:
            out[o] = start.position()
        elif o < body_start:
            out[o] = start.position() if o in boundaries else None
    for o in (o for o in want if o >= body_start):
        if broken is not None:
            out[o] = start.position() if o == broken else None if o < broken + 19 else "?"
            continue
        while off < o and broken is None:
            if off + 19 > n:
                break
            t, ln = data[off + 4], struct.unpack_from("<I", data, off + 9)[0]
            if ln < 19:
                broken = off
                break
            if off + ln > o:
                break
            if t == 162:
                if ln < 19 + 13 + crc or struct.unpack_from("<Q", data, off + 19)[0] == 0:
                    broken = off
                    break
                server = struct.unpack_from("<I", data, off + 5)[0]
                seq, domain = struct.unpack_from("<QI", data, off + 19)
                state.apply(domain, server, seq)
            off += ln
        if off == o:
            out[o] = state.position()
        elif broken is not None and o >= broken + 19:
            out[o] = "?"           # any event at ``broken`` takes at least a header
        else:
            out[o] = None          # o falls inside an event
    return out


def well_formed_forgery(bad: bytes, raw: bytes) -> bool:
    """Does ``bad`` pass the full structural check of an index, yet hold
    records other than ``raw``'s?"""
    from gtidx.index.reader import IndexReader
    try:
        r = IndexReader(bad)
        r.check()
        return [(x.offset, x.state) for x in r.records()] != [(x.offset, x.state)
                                                             for x in IndexReader(raw).records()]
    except GtidxError:
        return False


# -- one input -----------------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.inputs = 0
        self.faults = Counter()
        self.answers = 0
        self.wrong = 0
        self.forged_content = 0
        self.cont_pages = 0
        self.crashes = 0
        self.hangs = 0
        self.errors = 0          # GtidxError answers (acceptable where allowed)
        self.fixtures = Counter()
        self.examples: list[dict] = []

    def note(self, kind: str, fx: "Fixture", detail: str, what: str, info: str):
        if len(self.examples) < 30 or (what in ("wrong", "crash", "hang", "memory")
                                       and sum(e["what"] == what for e in self.examples) < 10):
            self.examples.append({"fault": kind, "fixture": fx.id, "detail": detail, "what": what,
                                  "info": info[-2000:]})

    def as_dict(self):
        return {"inputs": self.inputs, "faults": dict(sorted(self.faults.items())),
                "answers_checked": self.answers, "wrong_answers": self.wrong,
                "forged_content_mismatches": self.forged_content,
                "continuation_page_mismatches": self.cont_pages, "crashes": self.crashes,
                "hangs": self.hangs, "gtidx_errors": self.errors,
                "fixtures": len(self.fixtures), "examples": self.examples}


def run_input(fx: Fixture, kind: str, rnd: random.Random, stats: Stats, timeout: float) -> None:
    stats.inputs += 1
    stats.faults[kind] += 1
    stats.fixtures[fx.id] += 1
    binlog = fx.binlog
    idx = Path(str(binlog) + ".idx")
    if os.path.lexists(idx):
        idx.unlink()
    if os.path.lexists(binlog) and (binlog.is_symlink() or not binlog.is_file()):
        binlog.unlink()                 # a FIFO of the last input
    detail = ""
    bad = raw = None
    damaged_binlog = kind.startswith("bin_")
    layout = None
    try:
        if kind == "bin_fifo":
            data, detail = b"", "FIFO as the binlog"
            if os.path.lexists(binlog):
                binlog.unlink()
            os.mkfifo(binlog)
            mode = rnd.choice(("none", "stale")) if fx.indexes else "none"
        elif damaged_binlog:
            data, detail = mutate_binlog(kind, fx.data, rnd)
            binlog.write_bytes(data)
            mode = rnd.choice(("none", "stale", "fresh")) if fx.indexes else "none"
        if damaged_binlog:
            if mode == "stale":
                layout = rnd.choice(sorted(fx.indexes))
                raw, xattr = fx.indexes[layout]
                idx.write_bytes(raw)
                if xattr:
                    os.setxattr(idx, XATTR, xattr)
            elif mode == "fresh":
                try:
                    build_index(binlog, page_size=rnd.choice((64, 256, 4096)), span_min=rnd.choice((1, 2048)),
                                max_ratio=None, force=True)
                except GtidxError:
                    pass
            detail += f"; index {mode}{'' if layout is None else ' ' + layout}"
        else:
            if not fx.indexes:
                return
            layout = rnd.choice(sorted(fx.indexes))
            raw, xattr = fx.indexes[layout]
            data = fx.data
            binlog.write_bytes(data)
            if kind in FILE_FAULTS:
                bad, detail = None, plant_idx(kind, fx, idx, rnd)
            else:
                bad, detail = mutate_idx(kind, raw, rnd)
            if bad is not None:
                idx.write_bytes(bad)
                if xattr and rnd.random() < 0.8:
                    os.setxattr(idx, XATTR, xattr)
            detail = f"{layout}: {detail}"
    except Exception:
        stats.crashes += 1
        stats.note(kind, fx, detail, "harness setup", traceback.format_exc())
        return

    offsets = [o for o, _ in rnd.sample(fx.oracle_pos, min(24, len(fx.oracle_pos)))]
    offsets += [rnd.randrange(len(data) + 2) for _ in range(4)]
    expected_clean = dict(fx.oracle_pos)
    brute = None
    if damaged_binlog:
        brute = brute_positions(data, offsets)
        # the intact binlog's answers at every offset asked (random ones too)
        expected_clean = brute_positions(fx.data, offsets)
    stale_index_allowed = damaged_binlog and layout is not None

    def check(what, got, clean, brute_answer=None, index_used=False):
        stats.answers += 1
        if got == "error":
            stats.errors += 1
            if not damaged_binlog:
                return f"{what}: GtidxError on an intact binlog"
            return None
        if not damaged_binlog:
            if got != clean:
                return f"{what}: got {got}, scan of the intact binlog says {clean}"
            return None
        if brute_answer is not None:
            if brute_answer == "?":
                if stale_index_allowed and index_used and got == clean:
                    return None
                return f"{what}: got {got} (index used: {index_used}), but the bytes cannot be read that far"
            if got == brute_answer or (stale_index_allowed and index_used and got == clean):
                return None
            return f"{what}: got {got}, brute force of the damaged binlog says {brute_answer}, intact {clean}"
        return None

    problems = []
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            logs = api.BinlogSeries([str(binlog)])
        except GtidxError:
            logs = None
            stats.answers += 1
            stats.errors += 1
            if not damaged_binlog:
                problems.append("open: GtidxError on an intact binlog")
        if logs is not None:
            with logs:
                for o in offsets:
                    try:
                        r = logs.state_at(binlog, o)
                        got, via = r.position, r.via
                    except NotFoundError:
                        got, via = None, _via(logs, binlog)
                    except GtidxError:
                        got, via = "error", None
                    clean = expected_clean.get(o, "n/a")
                    if clean == "n/a" and not damaged_binlog:
                        continue        # a random offset: only the oracle's offsets are checked
                    p = check(f"state_at({o})", got, clean, brute[o] if brute else None,
                              index_used=(via == "index"))
                    if p:
                        problems.append(p)
                if not fx.encrypted:
                    for g in rnd.sample(sorted(fx.locate_base), min(6, len(fx.locate_base))):
                        try:
                            got = _locate(logs, g)
                        except GtidxError:
                            got = "error"
                        if damaged_binlog:
                            stats.answers += 1
                            stats.errors += got == "error"
                            continue    # no brute-force locate: errors and answers both counted, unchecked
                        p = check(f"locate({g})", got, fx.locate_base[g])
                        if p:
                            problems.append(p)
                    for g in rnd.sample(sorted(fx.replica_base), min(3, len(fx.replica_base))):
                        try:
                            got = _replica(logs, g)
                        except GtidxError:
                            got = "error"
                        if damaged_binlog:
                            stats.answers += 1
                            stats.errors += got == "error"
                            continue
                        p = check(f"replica_start({g})", got, fx.replica_base[g])
                        if p:
                            problems.append(p)
    except Hang:
        stats.hangs += 1
        stats.note(kind, fx, detail, "hang", f"no answer within {timeout} s")
        return
    except MemoryError:
        stats.crashes += 1
        stats.note(kind, fx, detail, "memory", traceback.format_exc())
        return
    except Exception:
        stats.crashes += 1
        stats.note(kind, fx, detail, "crash", traceback.format_exc())
        return
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if problems:
        if kind == "idx_reseal" or (not damaged_binlog and bad is not None and well_formed_forgery(bad, raw)):
            # the damage left a well-formed index (every CRC, key order, separator
            # and child pointer checks out) that holds other records: only a
            # comparison with the binlog (gtidx verify) can tell
            stats.forged_content += len(problems)
            stats.note(kind, fx, detail, "forged-content", "; ".join(problems[:3]))
        elif "[continuation pages]" in detail:
            stats.cont_pages += len(problems)
            stats.note(kind, fx, detail, "continuation-page move", "; ".join(problems[:3]))
        else:
            stats.wrong += len(problems)
            stats.note(kind, fx, detail, "wrong", "; ".join(problems[:3]))


# -- the campaign --------------------------------------------------------------------------------

def campaign(seed: int, runs: int | None, seconds: float | None, only: str | None = None,
             timeout: float = 20.0, progress=None, work: str | None = None,
             kinds: tuple[str, ...] = FAULTS) -> Stats:
    logger = logging.getLogger("gtidx")
    level = logger.level
    logger.setLevel(logging.CRITICAL)        # fallback warnings by the thousand: restored after
    try:
        return _campaign(seed, runs, seconds, only, timeout, progress, work, kinds)
    finally:
        logger.setLevel(level)


def _campaign(seed, runs, seconds, only, timeout, progress, work, kinds) -> Stats:
    rnd = random.Random(seed)
    stats = Stats()
    tmp = tempfile.mkdtemp(prefix="gtidx-fuzz-", dir=work)
    try:
        files = fixture_files(only)
        fixtures = [Fixture(p, o, Path(tmp), random.Random(seed + i)) for i, (p, o) in enumerate(files)]
        indexed = [fx for fx in fixtures if fx.indexes]
        for i, fx in enumerate(indexed):
            if len(indexed) > 1:
                fx.neighbour_index = indexed[(i + 1) % len(indexed)].own_index
        t0 = time.monotonic()
        i = 0
        while True:
            if runs is not None and i >= runs:
                break
            if seconds is not None and time.monotonic() - t0 >= seconds:
                break
            fx = fixtures[i % len(fixtures)]
            # every fault kind for every fixture, in turn: (fixture i, kind i // n_fixtures)
            kind = kinds[(i // len(fixtures)) % len(kinds)]
            if fx.encrypted and not kind.startswith("bin_"):
                kind = rnd.choice(BINLOG_FAULTS)
            run_input(fx, kind, random.Random(rnd.getrandbits(64)), stats, timeout)
            i += 1
            if progress and i % 100 == 0:
                progress(i, stats, time.monotonic() - t0)
        stats.seconds = time.monotonic() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return stats


def table(stats: Stats) -> str:
    d = stats.as_dict()
    lines = [f"{'fault':<22}{'inputs':>8}", "-" * 30]
    for k in FAULTS:
        lines.append(f"{k:<22}{d['faults'].get(k, 0):>8}")
    lines.append("-" * 30)
    for k in ("inputs", "fixtures", "answers_checked", "gtidx_errors", "wrong_answers",
              "forged_content_mismatches", "continuation_page_mismatches", "crashes", "hangs"):
        lines.append(f"{k:<26}{d[k]:>8}")
    lines.append(f"{'seconds':<26}{getattr(stats, 'seconds', 0):>8.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="fuzz", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--runs", type=int, help="inputs to try (default 1000 unless --seconds)")
    g.add_argument("--seconds", type=float, help="run for this long")
    ap.add_argument("--only", help="only fixtures whose id contains this")
    ap.add_argument("--kinds", help="comma-separated fault kinds (default: all)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per input before it counts as a hang")
    ap.add_argument("--memory-limit", type=int, default=4096, help="address-space limit in MiB")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.memory_limit:
        lim = args.memory_limit << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    kinds = tuple(args.kinds.split(",")) if args.kinds else FAULTS
    for k in kinds:
        if k not in FAULTS:
            ap.error(f"unknown fault kind {k}; one of {', '.join(FAULTS)}")
    runs = args.runs if args.runs is not None or args.seconds is not None else 1000

    def progress(i, st, el):
        if not args.quiet:
            print(f"... {i} inputs, {st.answers} answers, {st.wrong} wrong, {st.crashes} crashes, "
                  f"{st.hangs} hangs, {el:.0f} s", file=sys.stderr)
    stats = campaign(args.seed, runs, args.seconds, args.only, args.timeout, progress, kinds=kinds)
    if args.json:
        d = stats.as_dict()
        d.update(seed=args.seed, seconds=round(stats.seconds, 1))
        print(json.dumps(d, indent=1))
    else:
        print(f"tools/fuzz --seed {args.seed}: {len(stats.fixtures)} fixtures")
        print(table(stats))
        for ex in stats.examples[:10]:
            print(f"\n{ex['what']}: {ex['fault']} {ex['fixture']} ({ex['detail']})\n  {ex['info']}")
    return 1 if stats.wrong or stats.crashes or stats.hangs else 0


if __name__ == "__main__":
    sys.exit(main())
