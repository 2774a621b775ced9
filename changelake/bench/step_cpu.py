"""Where the machine's cores went during each load step: the pipeline, each service, and the rest
(the load generator and the system), read from /proc around each step's load.

The sustained figures are set by a machine every part of the system shares: at a given rate,
the cores Postgres, Debezium and Kafka take are not the pipeline's to use. Measured per step,
changelake's and the baseline's alike, so a report can say what a faster pipeline could have
had, and what it took.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from changelake.bench import markdown as md
from changelake.bench.pgbench_load import PgbenchRun
from changelake.bench.resources import CLK_TCK, PROC, cpu_seconds
from changelake.bench.sustained import Load

REST = "the rest"  # what no named process tree used: the load generator, the system
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal …; idle and iowait are
# time a core was free.
_IDLE_FIELDS = (3, 4)


def machine_cpu_seconds(proc: Path = PROC) -> float:
    """CPU seconds every core of the machine has been busy since boot."""
    first = (proc / "stat").read_text().splitlines()[0].split()
    assert first[0] == "cpu", f"{proc / 'stat'} does not start with the machine's cpu line"
    ticks = [int(v) for v in first[1:9]]
    return sum(v for i, v in enumerate(ticks) if i not in _IDLE_FIELDS) / CLK_TCK


@dataclass(frozen=True)
class StepCpu:
    """One load step: how many cores each part used on average while its load ran."""

    target_rate: float  # transactions/s asked for
    seconds: float  # how long its load ran
    cores: dict[str, float]  # by process tree, and REST: CPU seconds ÷ `seconds`
    machine_cores: float  # every core's busy time ÷ `seconds`

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cores_during(
    before: Mapping[str, float], after: Mapping[str, float], seconds: float, machine: float
) -> dict[str, float]:
    """Cores used by each tree between two readings of their CPU seconds, and by REST: the
    machine's busy cores (`machine`, over the same `seconds`) less the trees' (never below 0:
    the readings are not taken at one instant)."""
    cores = {name: max(0.0, after[name] - before[name]) / seconds for name in before}
    cores[REST] = max(0.0, machine - sum(cores.values()))
    return cores


def measured(
    load: Load,
    roots: Callable[[], Mapping[str, int | None]],
    into: list[StepCpu],
) -> Load:
    """`load`, each call of it (a step's load) adding to `into` how many cores each process
    tree `roots()` names (service → root pid, read as the step starts) and the machine used
    while it ran."""

    def load_at(rate: float, seconds: float, seed: int) -> PgbenchRun:
        trees = dict(roots())
        before = {name: cpu_seconds(pid) for name, pid in trees.items()}
        machine, started = machine_cpu_seconds(), time.monotonic()
        run = load(rate, seconds, seed)
        wall = max(time.monotonic() - started, 1e-9)
        busy = (machine_cpu_seconds() - machine) / wall
        after = {name: cpu_seconds(pid) for name, pid in trees.items()}
        into.append(StepCpu(rate, wall, cores_during(before, after, wall, busy), busy))
        return run

    return load_at


class CpuPerStep:
    """The cores used during each step of changelake's step-up and of the baseline's."""

    def __init__(self, services: Callable[[], Mapping[str, int]]) -> None:
        self.services = services  # the running services' root pids, by name
        self.found: dict[str, list[StepCpu]] = {"changelake": [], "baseline": []}

    def load(self, load: Load, pipeline: str, pid: Callable[[], int | None]) -> Load:
        """`load` measured for `pipeline` ("changelake" or "baseline"): every service, and the
        pipeline's process tree (`pid()`: its root when a step starts), as "<pipeline> run"."""
        trees = lambda: {**self.services(), f"{pipeline} run": pid()}  # noqa: E731
        return measured(load, trees, self.found[pipeline])

    def as_dict(self) -> dict[str, list[dict[str, Any]]]:
        return {name: [step.as_dict() for step in steps] for name, steps in self.found.items()}


def _cpu_table(steps: Sequence[Mapping[str, Any]], pipeline: str) -> str:
    names = [pipeline, *sorted({n for s in steps for n in s["cores"]} - {pipeline, REST}), REST]
    rows = [
        [
            md.count(s["target_rate"]),
            *(md.cell(s["cores"].get(n), lambda c: f"{c:.2f}") for n in names),
            f"{s['machine_cores']:.2f}",
        ]
        for s in steps
    ]
    header = ["target transactions/s", *names, "machine busy"]
    return md.table(header, rows)


def cpu_section(found: Mapping[str, Sequence[Mapping[str, Any]]] | None, cores: int) -> list[str]:
    """The report's section: per load step, the cores each part used, changelake's step-up and
    then the baseline's (reports written before it was measured have none)."""
    if not found or not found.get("changelake"):
        return []
    section = [
        "## Where the cores went during the load steps",
        f"Average cores in use while each step's load ran (the machine has {cores}), by process "
        f"tree: the pipeline, each service, and {REST} (pgbench, which writes the load, and the "
        "system). A pipeline can only use what the others leave.",
        _cpu_table(found["changelake"], "changelake run"),
    ]
    if found.get("baseline"):
        section += ["The baseline's step-up:", _cpu_table(found["baseline"], "baseline run")]
    return section
