"""Cores per process tree during each load step: the machine's busy time from /proc/stat, a real
step's load burning CPU in a child, and the report's table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from changelake.bench.pgbench_load import PgbenchRun
from changelake.bench.resources import CLK_TCK
from changelake.bench.step_cpu import (
    REST,
    CpuPerStep,
    StepCpu,
    cores_during,
    cpu_section,
    machine_cpu_seconds,
    measured,
)

BURN = "import time\nwhile time.process_time() < 0.4: pass\n"


def test_the_machines_busy_time_leaves_idle_and_iowait_out(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    (tmp_path / "stat").write_text("cpu  100 5 40 9000 700 3 2 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n")
    assert machine_cpu_seconds(tmp_path) == pytest.approx((100 + 5 + 40 + 3 + 2) / CLK_TCK)


def test_the_rest_is_what_no_tree_used_and_never_negative() -> None:
    before, after = {"pipeline": 10.0, "postgres": 4.0}, {"pipeline": 25.0, "postgres": 10.0}
    cores = cores_during(before, after, 10.0, machine=2.0)
    assert cores == {"pipeline": 1.5, "postgres": 0.6, REST: 0.0}
    assert cores_during(before, after, 10.0, machine=1.8)[REST] == 0.0  # readings a tick apart
    assert cores_during(before, after, 10.0, machine=2.5)[REST] == pytest.approx(0.4)


def test_a_steps_cores_are_measured_around_its_load() -> None:
    """A real process tree that burns 0.4 s of CPU while the step's load runs: its cores, times
    the step's length, are that CPU, and the machine was at least that busy."""
    burner = subprocess.Popen(
        [sys.executable, "-c", f"import sys\nsys.stdin.readline()\n{BURN}print(1, flush=True)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def load(rate: float, seconds: float, seed: int) -> PgbenchRun:
        assert burner.stdin is not None and burner.stdout is not None
        burner.stdin.write("go\n")
        burner.stdin.flush()
        burner.stdout.readline()  # it has burned its CPU
        return PgbenchRun(int(rate * seconds), 0, 0, 0, seconds, rate)

    steps: list[StepCpu] = []
    try:
        measured(load, lambda: {"burner": burner.pid, "gone": None}, steps)(250.0, 1.0, 7)
    finally:
        burner.communicate()
    (step,) = steps
    assert step.target_rate == 250.0 and set(step.cores) == {"burner", "gone", REST}
    assert 0.35 <= step.cores["burner"] * step.seconds <= 0.6
    assert step.cores["gone"] == 0.0
    assert step.machine_cores * step.seconds >= 0.35


def test_each_pipelines_steps_are_kept_apart_with_its_tree_named_after_it() -> None:
    def load(rate: float, seconds: float, seed: int) -> PgbenchRun:
        return PgbenchRun(int(rate * seconds), 0, 0, 0, seconds, rate)

    cpu = CpuPerStep(lambda: {"postgres": os.getppid()})
    cpu.load(load, "baseline", os.getpid)(500.0, 0.1, 3)
    found = cpu.as_dict()
    assert found["changelake"] == [] and [s["target_rate"] for s in found["baseline"]] == [500.0]
    assert set(found["baseline"][0]["cores"]) == {"postgres", "baseline run", REST}


def test_the_report_names_every_tree_the_pipeline_first_and_the_rest_last() -> None:
    step = {"target_rate": 500.0, "seconds": 60.0, "machine_cores": 1.96}
    ours = [{**step, "cores": {"postgres": 0.5, "changelake run": 0.9, REST: 0.3, "kafka": 0.26}}]
    theirs = [{**step, "cores": {"baseline run": 1.1, "postgres": 0.5, REST: 0.36}}]
    section = cpu_section({"changelake": ours, "baseline": theirs}, cores=2)
    text = "\n".join(section)
    assert "| target transactions/s | changelake run | kafka | postgres | the rest |" in text
    assert "| 500 | 0.90 | 0.26 | 0.50 | 0.30 | 1.96 |" in text
    assert "| 500 | 1.10 | 0.50 | 0.36 | 1.96 |" in text
    assert cpu_section(None, cores=2) == [] and cpu_section({"changelake": []}, cores=2) == []
