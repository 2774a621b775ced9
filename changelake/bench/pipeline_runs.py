"""`changelake run` and the baseline job as the benchmark starts them: subprocesses with the
benchmark's own lake, checkpoints and connector files, their output kept in a log and read back
for the figures they report about themselves (rows and seconds of each snapshot), and the CPU
seconds each used (its process tree, sampled: a process that exits unreaped loses at most its
last half second)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from changelake.bench.resources import ResourceSampler
from changelake.exceptions import ChangelakeError
from changelake.run_log import PREFIX

_SNAPSHOT = re.compile(r": snapshot ([\d,]+) rows from [\d,]+ records in ([\d.]+)s")
_BATCH = re.compile(r": batch \d+: ([\d,]+) changes from")
STARTED = re.compile(rf"^{PREFIX}changelake run: ")  # as logged: after the time and level


@dataclass(frozen=True)
class OnceRun:
    """One `run --once`: its snapshots and batches, and the seconds after Spark was ready until
    its last batch was committed (every change in the base tables) and until it exited; the CPU
    seconds it used in all."""

    snapshot_rows: int
    snapshot_s: float
    changes: int
    working_s: float
    queryable_s: float
    cpu_s: float = 0.0


def run_once(env: Mapping[str, str], log: Path) -> OnceRun:
    """`changelake run --once`, timed from the moment its Spark session is up to its exit."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "changelake.cli", "run", "--once"],
        env={**env, "PYTHONUNBUFFERED": "1"},  # each line read as it is printed, for the times
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sampler = ResourceSampler({"run": proc.pid})
    sampler.start()
    ready: float | None = None
    last_batch: float | None = None
    lines = []
    with log.open("a") as out:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            lines.append(line)
            if ready is None and STARTED.match(line):
                ready = time.monotonic()
            elif _BATCH.search(line):  # printed once the table's batch is committed
                last_batch = time.monotonic()
    code = proc.wait()
    ended = time.monotonic()
    cpu_s = sampler.stop()["run"].cpu_seconds
    if code != 0 or ready is None:
        raise ChangelakeError(f"bench: `changelake run --once` failed (exit {code})", f"see {log}")
    return replace(parse(lines, ended - ready, (last_batch or ended) - ready), cpu_s=cpu_s)


def parse(lines: list[str], working_s: float, queryable_s: float) -> OnceRun:
    snaps = [m for line in lines if (m := _SNAPSHOT.search(line))]
    batches = [m for line in lines if (m := _BATCH.search(line))]
    return OnceRun(
        snapshot_rows=sum(int(m.group(1).replace(",", "")) for m in snaps),
        snapshot_s=sum(float(m.group(2)) for m in snaps),
        changes=sum(int(m.group(1).replace(",", "")) for m in batches),
        working_s=working_s,
        queryable_s=queryable_s,
    )


def baseline(
    env: Mapping[str, str], jobs: list[dict[str, object]], log: Path
) -> tuple[float, float]:
    """The textbook job over `jobs`: the seconds its queries took, as it measured them, and the
    CPU seconds it used in all."""
    with log.open("a") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "changelake.bench.baseline", json.dumps(jobs)],
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
        )
        sampler = ResourceSampler({"baseline": proc.pid})
        sampler.start()
        said, _ = proc.communicate()
    cpu_s = sampler.stop()["baseline"].cpu_seconds
    if proc.returncode != 0:
        raise ChangelakeError(
            f"bench: the baseline job failed (exit {proc.returncode})", f"see {log}"
        )
    return float(json.loads(said.strip().splitlines()[-1])["seconds"]), cpu_s
