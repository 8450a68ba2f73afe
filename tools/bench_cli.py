"""Benchmarks of the command line end to end: batches from files (``batch``:
``seek --from`` / ``pos --from``, lookups/s and peak RSS) and start-up in a
regular install against ``import click`` (``startup``)."""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tools.bench_common import HERE, machine, percentile


# Runs the command in its argv[2:] and writes its peak RSS (bytes) to the file argv[1]. The command
# is started from this small process: a child's ru_maxrss starts at its parent's resident size when
# it execs (fork and vfork alike), which for the benchmark itself would hide the command's own.
_PEAK_RSS = """import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(p.pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _measured(cmd: list, env: dict, out: Path, peak: bool = False) -> tuple[float, float, int | None, int]:
    """Run ``cmd`` (stdout to the file ``out``, from its directory): (seconds,
    CPU seconds (user + system: what a busy machine's other work changes
    least), with ``peak`` its peak RSS in bytes (its own, through
    ``_PEAK_RSS``), exit status)."""
    rss = out.with_suffix(".rss")
    with open(out, "wb") as f:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(rss), *cmd] if peak else cmd, stdout=f,
                           stderr=subprocess.DEVNULL, env=env, cwd=out.parent)
        seconds = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, int(rss.read_text()) if peak else None, p.returncode


def bench_batch(args) -> dict:
    """``gtidx seek --from`` and ``gtidx pos --from`` end to end (a process
    each, start-up included) on a copy of the bundled multifile fixture with
    its indexes: every GTID of the fixture, and every offset of its oracle,
    ``--repeat`` times over, in file order; lookups per second (median of
    ``--runs``; and per CPU second, which a busy machine disturbs less),
    and the answers checked against single calls (a sample).
    Then each batch at ``--rss-lines`` lines (1,000,000: the same lines over
    and over): its peak RSS (``_PEAK_RSS``) and lookups/s. With ``--baseline
    DIR`` (another checkout, its C extension built), every run is made by
    both checkouts in turn, interleaved, so that the machine's noise hits
    both alike; each on its own copy of the fixture, indexed by its own
    gtidx (a checkout may not read what another stores with its indexes,
    and would then judge them as a server's, with other work)."""
    import shutil
    import tempfile
    src = HERE.parent / "fixtures" / "mariadb-10.11" / "multifile"
    oracle = json.loads((src / "oracle.json").read_text())
    gtidx_cmd = [sys.executable, "-m", "gtidx"]
    checkouts = {"this": HERE.parent, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    # each checkout's gtidx, and no other: run from the temporary directory (python -m puts the
    # current directory first on the module path), with the checkout alone on PYTHONPATH
    envs = {name: dict(os.environ, PYTHONPATH=str(root)) for name, root in checkouts.items()}
    with tempfile.TemporaryDirectory() as tmp:
        # each checkout its own copy, indexed by its own gtidx: what each stores with an index
        # (its fingerprint's layout) is read by that checkout, as a user's indexes are
        dirs = {c: Path(tmp) / c / "multifile" for c in checkouts}
        for c, d in dirs.items():
            shutil.copytree(src, d)
            subprocess.run(gtidx_cmd + ["build", "-q", str(d)], check=True, capture_output=True, env=envs[c],
                           cwd=tmp)
        gtids = [g for f in oracle["files"] for g, _, _ in f["groups"]]

        def offsets(d: Path) -> list:
            return [f"{d / f['name']} {off}" for f in oracle["files"] for off, _ in f["pos"]]
        # per batch: the command of a checkout (its copy), the lines of a checkout
        jobs = {"seek --from": (lambda d: ["seek", "--json", "--from", str(d / "gtids.txt"), str(d)],
                                lambda d: gtids),
                "pos --from": (lambda d: ["pos", "--json", "--from", str(d / "offsets.txt")], offsets)}
        report = {"machine": machine(), "repeat": args.repeat, "runs": args.runs, "rss_lines": args.rss_lines,
                  "checkouts": {name: str(root) for name, root in checkouts.items()}, "batches": {}}
        out = Path(tmp) / "out.txt"
        d = dirs["this"]
        for name, (command, lines_of) in jobs.items():
            cmds = {c: command(dirs[c]) for c in checkouts}
            for c in checkouts:
                Path(cmds[c][3]).write_text("\n".join(lines_of(dirs[c]) * args.repeat) + "\n")
            one = lines_of(d)
            lines = one * args.repeat
            times, cpus, got = {c: [] for c in checkouts}, {c: [] for c in checkouts}, None
            for _ in range(args.runs):
                for c in checkouts:
                    seconds, cpu, _, _ = _measured(gtidx_cmd + cmds[c], envs[c], out)
                    times[c].append(seconds)
                    cpus[c].append(cpu)
                    answers = out.read_text().splitlines()
                    assert len(answers) == len(lines), (name, c, len(answers), len(lines))
                    got = answers if c == "this" else got
            wrong = 0
            for line, got in list(zip(lines, got))[::max(1, len(lines) // 50)]:
                single = ["seek", "--json", "--gtid", line, str(d)] if name.startswith("seek") else \
                    ["pos", "--json", *line.rsplit(" ", 1)]
                want = subprocess.run(gtidx_cmd + single, capture_output=True, text=True, env=envs["this"],
                                      cwd=tmp).stdout.strip()
                a, b = json.loads(got), json.loads(want) if want else None
                if b is None or "error" in b:       # a line without an answer: its single call's error
                    wrong += a != {"input": line, "error": (b or {}).get("error", a.get("error"))}
                else:
                    wrong += {k: v for k, v in a.items() if k != "via"} != {k: v for k, v in b.items() if k != "via"}
            entry = report["batches"][name] = {"lookups": len(lines), "checked_wrong": wrong}
            for c in checkouts:
                med, cpu = statistics.median(times[c]), statistics.median(cpus[c])
                entry[c] = {"median_s": med, "min_s": min(times[c]), "max_s": max(times[c]),
                            "per_s": len(lines) / med, "cpu_median_s": cpu, "per_cpu_s": len(lines) / cpu}
                print(f"  {name:<12} {c:<8} {len(lines):>7} lookups  median {med:6.3f} s (min {min(times[c]):.3f}, "
                      f"max {max(times[c]):.3f})  {len(lines) / med:9,.0f} lookups/s end to end, "
                      f"{len(lines) / cpu:9,.0f} per CPU second"
                      + (f"  (sampled vs single calls: {wrong} wrong)" if c == "this" else ""))
            entry.update(entry["this"])         # the checkout's own figures where the report reads them
            if args.rss_lines:
                for c in checkouts:
                    mine = lines_of(dirs[c])
                    many = (mine * (args.rss_lines // len(mine) + 1))[:args.rss_lines]
                    Path(cmds[c][3]).write_text("\n".join(many) + "\n")
                    seconds, cpu, rss, rc = _measured(gtidx_cmd + cmds[c], envs[c], out, peak=True)
                    with open(out, "rb") as f:
                        answered = sum(1 for _ in f)
                    assert answered == len(many), (name, c, answered, len(many))
                    entry[c]["rss_lines"] = {"lines": len(many), "seconds": seconds, "per_s": len(many) / seconds,
                                             "cpu_s": cpu, "per_cpu_s": len(many) / cpu, "peak_rss_MB": rss / 1e6,
                                             "exit": rc}
                    print(f"  {name:<12} {c:<8} {len(many):>7} lookups  {seconds:6.3f} s  {len(many) / seconds:9,.0f} "
                          f"lookups/s, {len(many) / cpu:9,.0f} per CPU second  peak RSS {rss / 1e6:7.1f} MB")
    return report


# A bundled binlog (1 MB, 661 groups of 6 (domain, server) pairs) and a GTID near its end,
# found through the index gtidx builds for a copy of it (as a user's lookups are).
STARTUP_FIXTURE = ("mariadb-10.11", "mixed", "master-bin.000002", "2-2-225")
FROZEN_CLICK = "import click; gc.freeze()"


def startup_venv(venv: Path, checkout: Path = HERE.parent) -> Path:
    """A regular (non-editable) install of ``checkout`` (this one by default)
    and click into the venv ``venv`` (made if missing; gtidx reinstalled each
    time, so that the figures are the checkout's): its python."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # --no-deps: a lookup needs click alone (show's mysql-replication and PyMySQL are
    # imported by that command only); pip compiles the .pyc files as a user's install has them
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    str(checkout), "click"], check=True)
    return py


SEEK = "gtidx seek --gtid G FILE"
SEEK_BASELINE = "gtidx seek (baseline)"


def bench_startup(args) -> dict:
    """CLI start-up in a regular install: ``gtidx seek --gtid G FILE`` (a
    GTID found through the index of a copy of a bundled fixture) against
    ``python -c 'import click'`` (the floor of any click CLI) and ``python -c
    pass`` (the interpreter), run interleaved (order flipped every run) in
    the venv's interpreter, with the .pyc caches in use (no
    PYTHONDONTWRITEBYTECODE) and this checkout off the module path. The
    target: seek / import click <= 1.2, that is our own start-up
    cost (seek - import click) at most a fifth of the framework's.

    With ``--baseline DIR``, DIR is installed into a venv of its own (its
    index of the fixture built by its own gtidx) and its ``gtidx seek`` is
    one more command of every run: each run times both checkouts' seeks
    back to back, so that a start-up difference of a few milliseconds is
    not lost in the machine's slower swings; the report adds the ratio
    this / baseline of the seeks (medians, and per run) and of gtidx's own
    cost (seek - import click)."""
    import shutil
    import tempfile
    kind, scenario, name, gtid = STARTUP_FIXTURE
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")}
    baseline = getattr(args, "baseline", None)
    with tempfile.TemporaryDirectory(prefix="gtidx-bench-startup-") as tmp:
        t0 = time.perf_counter()
        venv = Path(args.venv) if args.venv else Path(tmp) / "venv"
        py = startup_venv(venv)
        install_s = time.perf_counter() - t0
        seeks = {SEEK: py}
        if baseline:
            if not (Path(baseline) / "pyproject.toml").is_file():
                raise SystemExit(f"--baseline {baseline}: not a gtidx checkout (no pyproject.toml)")
            seeks[SEEK_BASELINE] = startup_venv(Path(tmp) / "venv-baseline", Path(baseline).resolve())
        # the last: click with the exit gtidx's console entry has (gc.freeze at the end, cli.main),
        # so that the report shows what that exit spares apart from gtidx's own imports and work
        jobs = {"python -c pass": [str(py), "-c", "pass"],
                "python -c 'import click'": [str(py), "-c", "import click"]}
        for label, seek_py in seeks.items():
            d = Path(tmp) / ("baseline" if label == SEEK_BASELINE else "this")
            d.mkdir()
            binlog = d / name                   # each checkout's own index (their stored fingerprints may differ)
            shutil.copyfile(HERE.parent / "fixtures" / kind / scenario / name, binlog)
            gtidx_exe = str(seek_py.parent / "gtidx")
            subprocess.run([gtidx_exe, "build", "-q", str(binlog)], env=env, cwd=tmp, check=True,
                           stdout=subprocess.DEVNULL)
            jobs[label] = [gtidx_exe, "seek", "--gtid", gtid, str(binlog)]
            answer = subprocess.run(jobs[label], env=env, cwd=tmp, capture_output=True, text=True)
            if answer.returncode != 0 or not answer.stdout.endswith("(via index)\n"):
                raise SystemExit(f"{label} did not answer through the index: {answer.stdout}{answer.stderr}")
        jobs[FROZEN_CLICK] = [str(py), "-c", "import click, gc; gc.freeze()"]
        for cmd in jobs.values():        # warm: the page cache, and .pyc files pip did not write
            subprocess.run(cmd, env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        items = list(jobs.items())
        times = {k: [] for k in jobs}
        cpu = {k: [] for k in jobs}      # the child's user + system time: what a shared machine's load spares
        for i in range(args.runs):
            for k, cmd in (items if i % 2 == 0 else items[::-1]):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
                times[k].append((time.perf_counter() - t0) * 1e3)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[k].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3)
        profile = import_profile(py, ["import click"], jobs[SEEK][1:], env, tmp, max(5, args.runs // 3))
    med = {k: statistics.median(v) for k, v in times.items()}
    click_ms, pass_ms, seek_ms = med["python -c 'import click'"], med["python -c pass"], med[SEEK]
    # per run (the three measured back to back): the ratio's own spread
    ratios = [s / c for s, c in zip(times[SEEK], times["python -c 'import click'"])]
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    cpu_ratios = [s / c for s, c in zip(cpu[SEEK], cpu["python -c 'import click'"])]
    frozen_ms = med[FROZEN_CLICK]
    report = {"machine": machine(), "load_average": os.getloadavg(), "runs": args.runs,
              "fixture": f"{kind}/{scenario}/{name}", "gtid": gtid,
              "install_s": install_s, "ms": {k: {"min": min(v), "median": med[k], "max": max(v),
                                                 "p25": percentile(v, 25), "p75": percentile(v, 75)}
                                             for k, v in times.items()},
              "ratio_seek_to_click": seek_ms / click_ms,
              "ratio_per_run": {"min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)},
              "own_ms": seek_ms - click_ms, "framework_ms": click_ms - pass_ms,
              "own_share_of_click": (seek_ms - click_ms) / click_ms, "import_profile_ms": profile,
              "exit_spared_ms": click_ms - frozen_ms, "own_same_exit_ms": seek_ms - frozen_ms,
              "cpu_ms": {k: {"min": min(v), "median": cpu_med[k], "max": max(v)} for k, v in cpu.items()},
              "cpu_ratio_seek_to_click": cpu_med[SEEK] / cpu_med["python -c 'import click'"],
              "cpu_ratio_per_run": {"min": min(cpu_ratios), "median": statistics.median(cpu_ratios),
                                    "max": max(cpu_ratios)},
              "raw_ms": times, "raw_cpu_ms": cpu}
    print(f"CLI start-up, regular install ({venv}), {args.runs} interleaved runs, {machine()}")
    print(f"  {'command':<28} {'median ms':>9} {'min':>7} {'p25':>7} {'p75':>7} {'max':>7}")
    for k, v in report["ms"].items():
        print(f"  {k:<28} {v['median']:9.1f} {v['min']:7.1f} {v['p25']:7.1f} {v['p75']:7.1f} {v['max']:7.1f}")
    print(f"  seek / import click: {report['ratio_seek_to_click']:.2f} (per run: median "
          f"{report['ratio_per_run']['median']:.2f}, {report['ratio_per_run']['min']:.2f}-"
          f"{report['ratio_per_run']['max']:.2f}); our own cost {report['own_ms']:.1f} ms = "
          f"{report['own_share_of_click']:.0%} of import click (target <= 20%); click itself "
          f"{report['framework_ms']:.1f} ms over the interpreter's {pass_ms:.1f} ms")
    print(f"  the frozen exit (gc.freeze) spares import click {report['exit_spared_ms']:.1f} ms; with that exit "
          f"on both sides, gtidx's own imports and work take {report['own_same_exit_ms']:.1f} ms")
    print("  CPU time (user + system, median): " + ", ".join(f"{k} {v:.1f} ms" for k, v in cpu_med.items())
          + f"; seek / import click {report['cpu_ratio_seek_to_click']:.2f} (per run: median "
          f"{report['cpu_ratio_per_run']['median']:.2f}); load average {report['load_average'][0]:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"  where gtidx's own start-up goes: the modules `import click` does not import, self time "
          f"(python -X importtime, min of {max(5, args.runs // 3)} runs), {sum(profile.values()):.1f} ms in all:")
    print("    " + ", ".join(f"{m} {v:.2f}" for m, v in list(profile.items())[:16]))
    if SEEK_BASELINE in times:
        report["baseline"] = str(Path(baseline).resolve())
        report["against_baseline"] = against = startup_against_baseline(times)
        print(f"  against the baseline ({baseline}), in the same runs: gtidx seek {med[SEEK]:.1f} vs "
              f"{med[SEEK_BASELINE]:.1f} ms, this / baseline {against['seek_ratio']:.3f}x (per run: median "
              f"{against['seek_ratio_per_run']['median']:.3f}, {against['seek_ratio_per_run']['min']:.3f}-"
              f"{against['seek_ratio_per_run']['max']:.3f}); gtidx's own cost (seek - import click) "
              f"{against['own_ms']:.1f} vs {against['baseline_own_ms']:.1f} ms")
    return report


def startup_against_baseline(times: dict) -> dict:
    """From one startup run's times ({command: [ms per run]}) holding both
    checkouts' seeks: the ratio of their medians, its per-run spread (the
    two seeks of a run were back to back) and each one's own cost over
    ``import click``.

    >>> r = startup_against_baseline({SEEK: [60.0, 62.0, 70.0], SEEK_BASELINE: [57.0, 60.0, 66.0],
    ...                               "python -c 'import click'": [50.0, 50.0, 52.0]})
    >>> round(r["seek_ratio"], 3), r["own_ms"], r["baseline_own_ms"]
    (1.033, 12.0, 10.0)
    >>> round(r["seek_ratio_per_run"]["min"], 3), round(r["seek_ratio_per_run"]["max"], 3)
    (1.033, 1.061)
    """
    med = {k: statistics.median(v) for k, v in times.items()}
    per_run = [a / b for a, b in zip(times[SEEK], times[SEEK_BASELINE])]
    click = med["python -c 'import click'"]
    return {"seek_ratio": med[SEEK] / med[SEEK_BASELINE],
            "seek_ratio_per_run": {"min": min(per_run), "median": statistics.median(per_run), "max": max(per_run)},
            "own_ms": med[SEEK] - click, "baseline_own_ms": med[SEEK_BASELINE] - click}


def import_profile(py, base: list[str], argv: list[str], env: dict, cwd: str, runs: int) -> dict:
    """{module: self import time in ms, min over ``runs``} of the modules that
    ``python -m gtidx ARGV`` imports and ``python -c BASE`` does not, the
    costliest first (runpy's own modules left out)."""
    def times(cmd) -> dict:
        err = subprocess.run([str(py), "-X", "importtime", *cmd], env=env, cwd=cwd, capture_output=True,
                             text=True).stderr
        out = {}
        for line in err.splitlines():
            parts = line.split("|")
            if line.startswith("import time:") and len(parts) == 3 and parts[0].split(":")[1].strip().isdigit():
                out[parts[2].strip()] = int(parts[0].split(":")[1]) / 1e3
        return out
    skip = set(times(["-c", *base])) | set(times(["-c", "import runpy"]))
    mins: dict = {}
    for _ in range(runs):
        for m, t in times(["-m", "gtidx", *argv]).items():
            if m not in skip:
                mins[m] = min(t, mins.get(m, t))
    return dict(sorted(mins.items(), key=lambda kv: -kv[1]))
