"""The baseline under the sustained load: the textbook job streaming (`baseline --stream`), and
when each change became visible in its tables, read from its queries' checkpoints, so the job
does nothing it would not do for its users.

A batch's commit file is written once its foreachBatch MERGE has committed, and its offsets file
says up to where it read: a change is visible from the first batch whose end offset passed its
record. Its lag at each batch is that moment minus the commit time of the newest change read.
"""

from __future__ import annotations

import bisect
import json
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from changelake import kafka_io
from changelake.bench.baseline import STREAMING
from changelake.bench.stats import StepResult
from changelake.bench.sustained import Load, Say, judged_by_freshness, run_steps
from changelake.bench.visibility import Change, Visible, freshness_of, topic_changes
from changelake.exceptions import ChangelakeError

STOP_WAIT_S = 120.0  # a batch in flight ends first


@dataclass(frozen=True)
class BatchEnd:
    at_ms: int  # when its commit file was written: its MERGE had committed
    ends: dict[int, int]  # per partition, the offset after the last record it read


def batch_ends(checkpoint: Path, topic: str) -> list[BatchEnd]:
    """Every committed batch of the query checkpointed at `checkpoint`, in time order."""
    commits = checkpoint / "commits"
    found = []
    for commit in commits.iterdir() if commits.is_dir() else []:
        if not commit.name.isdigit():
            continue
        # offsets/N: "v1", the batch's metadata, then one line per source: {topic: {part: end}}
        lines = (checkpoint / "offsets" / commit.name).read_text().splitlines()
        ends = json.loads(lines[2]).get(topic, {})
        at = int(commit.stat().st_mtime * 1000)
        found.append(BatchEnd(at, {int(p): int(o) for p, o in ends.items()}))
    return sorted(found, key=lambda b: b.at_ms)


def freshness(changes: Sequence[Change], ends: Sequence[BatchEnd]) -> list[tuple[Change, float]]:
    """Each change a batch covered, with the seconds from its commit to that batch's end."""
    covered = []
    for partition, part in _by_partition(changes).items():
        moments = [Visible(b.at_ms, b.ends[partition] - 1) for b in ends if partition in b.ends]
        covered += freshness_of(part, moments, position=lambda c: c.offset)
    return covered


def lags(
    changes: Sequence[Change], ends: Sequence[BatchEnd], since_ms: int, until_ms: int
) -> list[tuple[int, float]]:
    """(batch end ms, lag s) of the batches that ended between two moments: how old the newest
    change it had read was by then."""
    newest: dict[int, tuple[list[int], list[int]]] = {}  # per partition: offsets, running max
    for partition, part in _by_partition(changes).items():
        ordered = sorted(part, key=lambda c: c.offset)
        running, peak = [], 0
        for change in ordered:
            peak = max(peak, change.committed_ms)
            running.append(peak)
        newest[partition] = ([c.offset for c in ordered], running)
    found = []
    for batch in ends:
        if not since_ms <= batch.at_ms <= until_ms:
            continue
        read = [
            newest[p][1][i - 1]
            for p, end in batch.ends.items()
            if p in newest and (i := bisect.bisect_left(newest[p][0], end)) > 0
        ]
        if read:
            found.append((batch.at_ms, max(0.0, (batch.at_ms - max(read)) / 1000)))
    return found


def read_to(ends: Sequence[BatchEnd], marks: Mapping[int, tuple[int, int]]) -> bool:
    """Whether the newest batch read every partition up to its high watermark."""
    last = ends[-1].ends if ends else {}
    return all(last.get(p, low) >= high for p, (low, high) in marks.items())


def _by_partition(changes: Sequence[Change]) -> Mapping[int, list[Change]]:
    parts: dict[int, list[Change]] = defaultdict(list)
    for change in changes:
        parts[change.partition].append(change)
    return parts


class BaselineStream:
    """`python -m changelake.bench.baseline --stream` as a subprocess: started, running once it
    says so, stopped by SIGTERM (it ends its batches first)."""

    def __init__(self, env: Mapping[str, str], jobs: list[dict[str, object]], log: Path):
        self.env, self.jobs, self.log = env, jobs, log
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "changelake.bench.baseline",
                    "--stream",
                    json.dumps(self.jobs),
                ],
                env={**self.env, "PYTHONUNBUFFERED": "1"},
                stdout=subprocess.PIPE,
                stderr=out,
                text=True,
            )
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # the job prints nothing else to stdout
            if line.strip() == STREAMING:
                return
        raise ChangelakeError(
            f"bench: the streaming baseline exited (code {self.proc.wait()}) before it ran",
            f"see {self.log}",
        )

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def sustained(
    bootstrap: str,
    stream: BaselineStream,
    load: Load,
    rates: Sequence[float],
    step_s: float,
    settle_s: float,
    max_lag_s: float,
    say: Say,
) -> tuple[list[StepResult], list[float]]:
    """The step-up against the streaming baseline, judged as changelake's is: its steps, and the
    freshness of every change it made visible."""
    checkpoints = {str(j["topic"]): Path(str(j["checkpoint"])) for j in stream.jobs}
    start = {
        t: {p: high for p, (_, high) in kafka_io.watermarks(bootstrap, t).items()}
        for t in checkpoints
    }

    def observed() -> list[tuple[list[Change], list[BatchEnd]]]:
        return [
            (topic_changes(bootstrap, t, start[t]), batch_ends(path, t))
            for t, path in checkpoints.items()
        ]

    def lags_between(since_ms: int, until_ms: int) -> list[tuple[int, float]]:
        return [
            lag for changes, ends in observed() for lag in lags(changes, ends, since_ms, until_ms)
        ]

    def caught_up() -> bool:
        return all(
            read_to(batch_ends(path, t), kafka_io.watermarks(bootstrap, t))
            for t, path in checkpoints.items()
        )

    stream.start()
    try:
        steps = run_steps(load, lags_between, rates, step_s, settle_s, max_lag_s, say, caught_up)
    finally:
        stream.stop()
    seen = [
        (c.committed_ms, s) for changes, ends in observed() for c, s in freshness(changes, ends)
    ]
    judged = [judged_by_freshness(step, seen, step_s, max_lag_s) for step in steps]
    return judged, [s for _, s in seen]
