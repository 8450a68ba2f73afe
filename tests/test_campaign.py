"""The fault campaigns of tools/campaign (issue 11), a bounded share of each:
planted links, shrinking files, FIFOs, full disks, vanishing directories
(real ones: symlinks, hard links, os.truncate, os.mkfifo, tmpfs mounts,
renamed and removed directories) and non-monotonic histories written by a
private live MariaDB 10.11. Each runs as a user runs it (its own process, its
own time limits); the oracles are the fixtures' oracle.json (the server's
BINLOG_GTID_POS), SHOW BINLOG EVENTS, real replica connections, victims'
bytes and clean builds."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from tools import campaign

CAMPAIGN = ROOT / "tools" / "campaign"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts tmpfs/ramfs, changes owners: needs root (the CI runs as root)")


def run(tmp_path: Path, scenario: str, runs: int, seed: int, timeout: float = 20) -> dict:
    out = subprocess.run([str(CAMPAIGN), "--scenarios", scenario, "--runs", str(runs),
                          "--seed", str(seed), "--timeout", str(timeout), "--json", "--quiet",
                          "--work", str(tmp_path)],
                         capture_output=True, text=True, timeout=240, env=dict(os.environ, PYTHON=sys.executable))
    assert out.stdout, out.stderr[-3000:]
    res = json.loads(out.stdout)
    c = res["scenarios"][scenario]
    print(scenario, c)
    assert res["failures"] == 0, json.dumps(res["examples"], indent=1)[:6000]
    assert out.returncode == 0, out.stderr[-2000:]
    assert c["inputs"] == runs
    return c




@needs_root
def test_planted_links_are_never_followed(tmp_path):
    """Symlinks and hard links at FILE.idx and at every name build/tail create
    (temporary names for the next 300 pids), pointing outside: the victims are
    untouched after build, build --force and tail --once; answers are right."""
    c = run(tmp_path, "links", 3, 20261123)
    assert c["links planted"] >= 1000 and c["pid covered"] == 3
    assert c["victims checked"] >= 9 and c["answers"] >= 60


def test_readers_survive_files_shrinking_under_them(tmp_path):
    """A reader process looking up in a loop while the active binlog or an
    index is truncated in place: never a signal, never a wrong answer."""
    c = run(tmp_path, "shrink", 3, 20261123)
    assert c["truncations"] >= 8 and c["answers"] >= 150


def test_fifos_never_hang_a_command(tmp_path):
    """A FIFO as a listed binlog, an extra binlog-named file, FILE.idx, or the
    file named: every command ends within 10 s, clearly or with the right answer."""
    c = run(tmp_path, "fifo", 4, 20261123, timeout=10)
    assert c["commands"] >= 20


@needs_root
def test_full_disks_leave_no_partial_index(tmp_path):
    """build / tail --once / the tail daemon on a tmpfs too small for the
    indexes: no 0-byte, partial or temporary index; after growing it, indexes
    equal a clean build."""
    c = run(tmp_path, "diskfull", 3, 20261123)
    assert c["ran out of space"] + c["variant tail"] >= 1
    assert c["indexes compared"] >= 6


@needs_root
def test_permission_denied_is_clear_and_tail_recovers(tmp_path):
    """gtidx without the capabilities that ignore permissions, the directory or
    its indexes owned by another user: build and tail --once fail clearly,
    the tail daemon stays up and finishes once ownership is given back."""
    c = run(tmp_path, "denied", 3, 20261123)
    assert c["refused clearly"] + c["recovered"] == 3


@needs_root
def test_tail_survives_a_vanishing_directory(tmp_path):
    """The binlog directory renamed, removed, emptied, hidden by a mount
    or flapping while `gtidx tail` runs: it stays up and recovers."""
    c = run(tmp_path, "vanish", 3, 20261123)
    assert c["recovered"] == 3


def test_build_force_and_sigint_racing_tail(tmp_path):
    """build --force of the active binlog, half interrupted by SIGINT, while
    tail follows it: no temporary file left, and once closed every index
    equals a clean build and is marked complete."""
    c = run(tmp_path, "race", 2, 20261123)
    assert c["builds"] >= 8 and c["indexes compared"] >= 8


@pytest.mark.live
def test_non_monotonic_histories_from_a_live_server(tmp_path):
    """Seeded histories from a private 10.11 (gtid_strict_mode=0): seq_no steps
    back and repeats across FLUSH BINARY LOGS with alternating server ids.
    locate = the first occurrence SHOW BINLOG EVENTS shows, state_at =
    BINLOG_GTID_POS, replica_start = a real replica (strict and not), without
    an index, with page size 64 / span 1 and with the default layout."""
    c = run(tmp_path, "nonmono", 3, 20261123, timeout=60)
    assert c["GTIDs written more than once"] >= 2
    assert c["answers"] >= 600 and c["real replica connections"] >= 30


# -- the harness is not hollow -----------------------------------------------------------------

@needs_root
def test_links_campaign_reports_a_write_through_a_link(tmp_path, monkeypatch):
    """A command that writes through FILE.idx is caught: the victim changed."""
    real = campaign.run_gtidx

    def leaky(args, **kw):
        d = Path(args[-1])
        for idx in sorted(d.glob("*.idx")):
            with open(idx, "ab") as f:          # follows a planted symlink
                f.write(b"!")
            break
        return real(args, **kw)
    monkeypatch.setattr(campaign, "run_gtidx", leaky)
    stats = campaign.campaign(7, ("links",), runs=2, work=str(tmp_path))
    assert stats.c("links")["wrong"] >= 1
    assert any("wrote through a planted link" in e["detail"] for e in stats.examples)


def test_shrink_oracle_allows_not_found_only_past_the_smallest_size():
    events = [(0.0, 1000), (10.0, 300), (11.0, 1000), (20.0, 50)]
    assert campaign.min_size(events, 1.0, 5.0) == 1000
    assert campaign.min_size(events, 1.0, 10.5) == 300
    assert campaign.min_size(events, 10.5, 10.7) == 300       # opened while it was short
    assert campaign.min_size(events, 12.0, 19.0) == 1000
    assert campaign.min_size(events, 12.0, 25.0) == 50


def test_learned_names_generalise_binlog_name_and_pid(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    recs = [["open", str(d / ".master-bin.000007.idx.4242.tmp"), os.O_WRONLY | os.O_CREAT, "", "/"],
            ["os.rename", str(d / ".master-bin.000007.idx.4242.tmp"), str(d / "master-bin.000007.idx"), "/"],
            ["open", "master-bin.000007.idx", os.O_RDWR, "", str(d)],
            ["open", str(tmp_path / "elsewhere"), os.O_WRONLY, "", "/"]]
    got = campaign.learned_names(recs, d, ["master-bin.000007"], 4242)
    assert got == {".{name}.idx.{pid}.tmp", "{name}.idx"}
