"""What the ``gtidx spark`` commands run: a session (their own, or the caller's), the
job, and the progress the driver can see (``SparkProgress``)."""
from __future__ import annotations

import os
import threading
import time
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession

from .. import api
from .indexes import build
from .locate import locate
from .session import own_session
from .where import Where, say_warnings, warnings_accumulator


class SparkProgress(NamedTuple):
    """What the driver can see of a CLI run, for its ``progress`` callback."""
    phase: str           # "planning", "locating", "counting" (locate); "building indexes" (build)
    tasks_done: int      # tasks finished in this phase's Spark jobs (stages not yet planned: not counted)
    tasks: int           # tasks in this phase's stages known so far
    elapsed: float       # seconds since the run began (starting Spark included)


class _Watch:
    """Reports the phase of a run and its Spark tasks done, polling the status
    tracker (``statusTracker()``: the driver's own bookkeeping, no extra job)
    in a daemon thread every ``interval`` seconds, and once more at each phase
    change and at the end. Each phase's jobs run in their own job group."""

    def __init__(self, progress, interval: float = 0.25):
        self.progress = progress
        self.interval = interval
        self.t0 = time.monotonic()
        self.sc = None
        self.phase = ""
        self.group = None
        self._n = 0
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()     # one report at a time: the poller's or the driver's

    def enter(self, phase: str) -> None:
        if self.progress is None:
            return
        self._report()                      # the phase that ends, as it ends
        with self._lock:
            self.phase = phase
            if self.sc is not None:
                self._n += 1
                self.group = f"gtidx-{id(self):x}-{self._n}"
                self.sc.setJobGroup(self.group, f"gtidx: {phase}")
        self._report()

    def attach(self, sc) -> None:
        """The SparkContext is up: start polling."""
        self.sc = sc
        if self.progress is not None:
            self._thread = threading.Thread(target=self._poll, name="gtidx-progress", daemon=True)
            self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.progress is not None:
            self._report()

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._report()

    def _report(self) -> None:
        with self._lock:
            done = total = 0
            if self.sc is not None and self.group is not None:
                try:
                    done, total = self.tasks_of(self.sc.statusTracker(), self.group)
                except Exception:     # the context is stopping: no count, the work goes on
                    pass
            if self.phase:
                self.progress(SparkProgress(self.phase, done, total, time.monotonic() - self.t0))

    @staticmethod
    def tasks_of(tracker, group: str) -> tuple[int, int]:
        """(done, total) tasks of the stages of the jobs of ``group`` planned so far."""
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is None or (job.status == "SUCCEEDED" and stage.numCompletedTasks == 0):
                    continue          # not planned yet, or skipped (its shuffle output reused)
                done += stage.numCompletedTasks
                total += stage.numTasks
        return done, total


def locate_to_parquet(gtids_path: str, binlogs: str, out: str, master: str = "local[*]",
                      progress=None, storage_options: dict | None = None,
                      index_root: str | None = None, history: int | None = None) -> tuple[int, int]:
    """``gtidx spark locate``: the GTIDs of a .txt/.csv/.parquet file located
    in ``binlogs`` (a path or URL, with ``storage_options``, ``index_root``
    and ``history`` as for ``locate``), written to ``out`` (parquet,
    overwritten); (rows, found). ``progress``: called with a SparkProgress as
    phases and tasks advance."""
    listing = api.list_series(binlogs, storage_options, index_root=index_root)   # once: locate plans on it
    Where(storage_options, index_root).open_listing(listing, history).close()   # several histories: before Spark
    watch = _Watch(progress)
    with own_session(master) as spark:
        try:
            watch.attach(spark.sparkContext)
            watch.enter("planning")
            warned = warnings_accumulator(spark.sparkContext)
            df = locate(spark, read_gtids(spark, gtids_path), listing, storage_options=storage_options,
                        index_root=index_root, history=history, warnings=warned)
            watch.enter("locating")
            df.write.mode("overwrite").parquet(out)
            say_warnings(warned)
            watch.enter("counting")
            done = spark.read.parquet(out)
            return done.count(), done.filter("found").count()
        finally:
            watch.close()


def build_rows(binlogs: str, master: str = "local[*]", progress=None, **kw) -> list[dict]:
    """``gtidx spark build``: ``build`` on a session of its own (or the
    caller's), one dict per file.
    ``progress``: as for ``locate_to_parquet`` (one task per file)."""
    watch = _Watch(progress)
    with own_session(master) as spark:
        try:
            watch.attach(spark.sparkContext)
            watch.enter("building indexes")
            return [r.asDict() for r in build(spark, binlogs, **kw).collect()]
        finally:
            watch.close()


def read_gtids(spark: SparkSession, path: str) -> DataFrame:
    """GTIDs from a .txt (one per line), .csv (a ``gtid`` column, else the
    first) or .parquet file."""
    lower = path.lower()
    if lower.endswith(".parquet") or os.path.isdir(path):
        return spark.read.parquet(path)
    if lower.endswith(".csv"):
        return spark.read.option("header", True).csv(path)
    return spark.read.text(path).withColumnRenamed("value", "gtid")
