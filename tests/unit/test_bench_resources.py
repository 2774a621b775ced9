"""CPU and memory per service from /proc: parsing, the accounting rules, and a real sampler."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from changelake.bench import resources
from changelake.bench.resources import (
    CLK_TCK,
    ProcessTree,
    ProcStat,
    ResourceSampler,
    descendants,
    parse_stat,
    read_processes,
    rss_kb,
)
from changelake.exceptions import ChangelakeError

NO_SUCH_PID = 2**22  # above the kernel's largest pid_max

# burns a fixed amount of CPU, however busy the machine is
BURN = "import time\nwhile time.process_time() < 0.3: pass\n"


def stat_line(pid: int, comm: str, ppid: int, times: tuple[int, int, int, int], start: int) -> str:
    utime, stime, cutime, cstime = times
    fields = ["S", ppid, *[0] * 9, utime, stime, cutime, cstime, 20, 0, 1, 0, start, 1000, 10]
    return f"{pid} ({comm}) " + " ".join(str(f) for f in fields) + "\n"


def test_stat_lines_are_parsed_even_with_odd_command_names() -> None:
    line = stat_line(42, "we ird) (name", 7, (10, 5, 3, 2), 9000)
    assert parse_stat(line) == ProcStat(42, 7, 9000, 15, 5)


def test_processes_that_cannot_be_read_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "stat").write_text(stat_line(1, "init", 0, (1, 2, 3, 4), 5))
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "stat").write_text("garbage")
    (tmp_path / "3").mkdir()  # exited between listing and reading
    (tmp_path / "self").mkdir()
    assert read_processes(tmp_path) == {1: ProcStat(1, 0, 5, 3, 7)}


def test_this_process_and_its_children_are_found() -> None:
    # A child that lives until we close its stdin: nothing here waits on a clock.
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        processes = read_processes()
        assert processes[os.getpid()].ppid == os.getppid()
        tree = descendants(processes, os.getpid())
        assert tree[0] == os.getpid()
        assert child.pid in tree
        assert os.getppid() not in tree
        assert descendants(processes, NO_SUCH_PID) == []
    finally:
        child.kill()
        child.wait()
    assert rss_kb(os.getpid()) > 1000
    assert rss_kb(NO_SUCH_PID) == 0


SINCE = 1000  # boot ticks when the measurement started


def proc(pid: int, ppid: int, own: int, reaped: int = 0, start: int = SINCE + 1) -> ProcStat:
    return ProcStat(pid, ppid, start, own, reaped)


def table(*stats: ProcStat) -> dict[int, ProcStat]:
    return {stat.pid: stat for stat in stats}


def no_rss(pid: int) -> int:
    return 0


def ticks(tree: ProcessTree) -> float:
    return tree.usage().cpu_seconds * CLK_TCK


def test_a_child_reaped_by_the_tree_is_counted_exactly_once() -> None:
    tree = ProcessTree(10, SINCE)
    root = proc(10, 1, own=500, start=1)  # older than the measurement: its past is not counted
    tree.observe(table(root, proc(11, 10, own=10)), no_rss)
    assert ticks(tree) == pytest.approx(10)  # born after the start: all of its life counts
    tree.observe(table(root, proc(11, 10, own=30)), no_rss)
    # the child used 35 ticks in all; when reaped they land in the root's cutime/cstime
    tree.observe(table(proc(10, 1, own=502, reaped=35, start=1)), no_rss)
    assert ticks(tree) == pytest.approx(35 + 2)


def test_an_exited_child_nobody_waits_for_loses_only_its_last_interval() -> None:
    tree = ProcessTree(10, SINCE)
    root = proc(10, 1, own=500, start=1)
    tree.observe(table(root, proc(11, 10, own=10)), no_rss)
    tree.observe(table(root, proc(11, 10, own=30)), no_rss)
    tree.observe(table(root), no_rss)
    assert ticks(tree) == pytest.approx(30)


def test_a_whole_branch_reaped_at_once_is_counted_exactly_once() -> None:
    tree = ProcessTree(10, SINCE)
    root = proc(10, 1, own=0, start=1)
    tree.observe(table(root, proc(11, 10, own=10), proc(12, 11, own=20)), no_rss)
    # 12 ends with 25 ticks, reaped by 11; 11 ends with 15 of its own, reaped by 10
    tree.observe(table(proc(10, 1, own=0, reaped=15 + 25, start=1)), no_rss)
    assert ticks(tree) == pytest.approx(40)


def test_a_process_older_than_the_measurement_counts_from_when_it_is_first_seen() -> None:
    tree = ProcessTree(10, SINCE)
    tree.observe(table(proc(10, 1, own=100, start=1)), no_rss)
    tree.observe(table(proc(10, 1, own=100, start=1), proc(11, 10, own=70, start=2)), no_rss)
    tree.observe(table(proc(10, 1, own=100, start=1), proc(11, 10, own=75, start=2)), no_rss)
    assert ticks(tree) == pytest.approx(5)


def test_a_gone_root_or_a_reused_pid_counts_nothing_more() -> None:
    tree = ProcessTree(10, SINCE)
    tree.observe(table(proc(10, 1, own=100)), no_rss)
    tree.observe(table(), no_rss)
    tree.observe(table(proc(10, 1, own=900, start=SINCE + 50)), no_rss)  # another process
    assert ticks(tree) == pytest.approx(100)


def test_peak_memory_is_the_peak_of_the_tree_sum() -> None:
    tree = ProcessTree(10, SINCE)
    rss = {10: 100 * 1024, 11: 50 * 1024, 99: 10_000 * 1024}
    tree.observe(table(proc(10, 1, 0), proc(11, 10, 0), proc(99, 1, 0)), rss.__getitem__)
    tree.observe(table(proc(10, 1, 0)), rss.__getitem__)
    assert tree.usage().peak_rss_mb == pytest.approx(150)


def test_the_sampler_sees_a_child_burning_cpu() -> None:
    sampler = ResourceSampler({"tests": os.getpid()}, interval_s=0.05)
    sampler.start()
    burner = subprocess.Popen([sys.executable, "-c", BURN])
    sampler.add("burner", burner.pid)  # added after start, as the pipeline will be
    burner.wait(timeout=20)  # reaped by this process: its whole life lands in our cutime
    usage = sampler.stop()
    assert usage["tests"].cpu_seconds >= 0.3
    assert usage["burner"].cpu_seconds >= 0.2  # exited unreaped by its own tree
    assert usage["tests"].peak_rss_mb > usage["burner"].peak_rss_mb > 1


def test_the_sampler_refuses_unknown_pids_and_misuse() -> None:
    with pytest.raises(ChangelakeError, match=f"service 'ghost' has no process {NO_SUCH_PID}"):
        ResourceSampler({"ghost": NO_SUCH_PID})
    sampler = ResourceSampler({"tests": os.getpid()})
    with pytest.raises(ValueError, match="already sampled"):
        sampler.add("tests", os.getpid())
    with pytest.raises(RuntimeError, match="before start"):
        sampler.stop()


def test_cpu_seconds_counts_each_process_once() -> None:
    # The root is in its own tree: counting it again doubled every Connect CPU figure. A child
    # of its own, so the suite's other processes (Spark's JVM) are not in the tree measured.
    spin = (
        "import os, sys, time\n"
        "end = time.process_time() + 0.5\n"
        "while time.process_time() < end: pass\n"
        "t = os.times(); print(t.user + t.system, flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        own = float(child.stdout.readline())
        measured = resources.cpu_seconds(child.pid)
    finally:
        child.communicate("")
    assert abs(measured - own) < 0.05 + 0.1 * own
