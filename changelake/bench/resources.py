"""CPU seconds and peak memory per service, read from Linux's /proc (no psutil).

A service is a process tree: a Postgres server is a postmaster and its backends, the pipeline is a
Python driver and its JVM. `ResourceSampler` follows every service's tree on a background thread:

    sampler = ResourceSampler({"postgres": pg_pid, "kafka": kafka_pid})
    sampler.start()
    sampler.add("pipeline", pipeline_pid)  # started after the services
    ...
    usage = sampler.stop()  # {"postgres": ServiceUsage(cpu_seconds=…, peak_rss_mb=…), …}
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from changelake.exceptions import ChangelakeError
from changelake.settings import Settings
from changelake.stack import manager

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")
INTERVAL_S = 0.5

Key = tuple[int, int]  # (pid, start ticks): a pid the kernel reuses is a different process


@dataclass(frozen=True)
class ProcStat:
    """The parts of /proc/<pid>/stat that accounting needs; times in clock ticks."""

    pid: int
    ppid: int
    start_ticks: int  # since boot
    own_ticks: int  # utime + stime, over all the process's threads
    reaped_ticks: int  # cutime + cstime: children it waited for, added when they were reaped

    @property
    def key(self) -> Key:
        return (self.pid, self.start_ticks)

    @property
    def total(self) -> int:
        return self.own_ticks + self.reaped_ticks


def parse_stat(text: str) -> ProcStat:
    # the command name (field 2) is in parentheses and may itself hold spaces and parentheses
    pid = int(text[: text.index("(")])
    rest = text[text.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(v) for v in rest[11:15])
    return ProcStat(pid, int(rest[1]), int(rest[19]), utime + stime, cutime + cstime)


def read_processes(proc: Path = PROC) -> dict[int, ProcStat]:
    """Every process on the machine by pid; processes that exit while being read are left out."""
    found = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            stat = parse_stat((proc / entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue
        found[stat.pid] = stat
    return found


def descendants(processes: Mapping[int, ProcStat], root: int) -> list[int]:
    """`root` and every process below it, or nothing when `root` is not running."""
    if root not in processes:
        return []
    children: dict[int, list[int]] = {}
    for stat in processes.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def rss_kb(pid: int, proc: Path = PROC) -> int:
    """VmRSS of one process in KiB; 0 for a process that is gone or has no memory of its own."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def boot_ticks(proc: Path = PROC) -> int:
    """Now, on the clock /proc/<pid>/stat's start time uses: ticks since boot."""
    return int(float((proc / "uptime").read_text().split()[0]) * CLK_TCK)


@dataclass(frozen=True)
class ServiceUsage:
    cpu_seconds: float
    peak_rss_mb: float  # MiB

    def as_dict(self) -> dict[str, float]:
        return {"cpu_seconds": self.cpu_seconds, "peak_rss_mb": self.peak_rss_mb}


class ProcessTree:
    """One service's processes, followed from sample to sample.

    CPU: each process counts the ticks it used since it was first seen (all of them if it was born
    after `since_ticks`, when the measurement started). A process that exits is either reaped by
    a parent in the tree, whose cutime/cstime then grows by its whole life, so it is counted
    exactly, or not (orphaned, or a parent that never waits), and then it loses at most the one
    interval since it was last seen.

    Memory: the peak, over samples, of the sum of the tree's VmRSS. A peak shorter than the
    interval can be missed. Shared memory counts once per process mapping it (Postgres' shared
    buffers, in every backend that touched them), so for Postgres this is an upper bound. VmHWM
    is not used: it covers a process's whole life, not the measured window.
    """

    def __init__(self, root_pid: int, since_ticks: int) -> None:
        self.root_pid = root_pid
        self._since = since_ticks
        self._root_key: Key | None = None
        self._known: dict[Key, ProcStat] = {}
        self._ticks = 0
        self._peak_kb = 0

    def observe(self, processes: Mapping[int, ProcStat], rss: Callable[[int], int]) -> None:
        current = {stat.key: stat for stat in self._members(processes)}
        self._ticks += self._new_ticks(current) - self._counted_twice(current)
        self._known = current
        self._peak_kb = max(self._peak_kb, sum(rss(pid) for pid, _ in current))

    def usage(self) -> ServiceUsage:
        return ServiceUsage(self._ticks / CLK_TCK, self._peak_kb / 1024)

    def _members(self, processes: Mapping[int, ProcStat]) -> list[ProcStat]:
        root = processes.get(self.root_pid)
        if root is None:
            return []
        if self._root_key is None:
            self._root_key = root.key
        elif root.key != self._root_key:  # the service is gone and its pid went to another
            return []
        return [processes[pid] for pid in descendants(processes, self.root_pid)]

    def _new_ticks(self, current: Mapping[Key, ProcStat]) -> int:
        ticks = 0
        for key, stat in current.items():
            before = self._known.get(key)
            if before is not None:
                ticks += stat.total - before.total
            elif stat.start_ticks >= self._since:
                ticks += stat.total
        return ticks

    def _counted_twice(self, current: Mapping[Key, ProcStat]) -> int:
        """Ticks of exited processes that were counted while they ran and again when reaped.

        A reaped process's whole life lands in its nearest surviving ancestor's cutime/cstime; the
        part seen before (its last total) was already counted. Capped by what that ancestor's
        reaped ticks actually grew, so a process nobody waited for subtracts nothing.
        """
        grown = {
            key: stat.reaped_ticks - self._known[key].reaped_ticks
            for key, stat in current.items()
            if key in self._known
        }
        known_by_pid = {stat.pid: stat for stat in self._known.values()}
        live_by_pid = {stat.pid: key for key, stat in current.items()}
        twice = 0
        for key, gone in self._known.items():
            heir = None if key in current else _heir(gone.ppid, known_by_pid, live_by_pid)
            if heir is not None and heir in grown:
                taken = min(gone.total, grown[heir])
                grown[heir] -= taken
                twice += taken
        return twice


def _heir(ppid: int, known: Mapping[int, ProcStat], live: Mapping[int, Key]) -> Key | None:
    """The nearest ancestor of an exited process that is still running, if any."""
    pid, seen = ppid, set()
    while pid not in seen:
        seen.add(pid)
        if pid in live:
            return live[pid]
        if pid not in known:
            return None
        pid = known[pid].ppid
    return None


class ResourceSampler:
    """Samples CPU and memory of named process trees every `interval_s` on a daemon thread."""

    def __init__(
        self, services: Mapping[str, int], interval_s: float = INTERVAL_S, proc: Path = PROC
    ) -> None:
        self.interval_s = interval_s
        self._proc = proc
        self._roots: dict[str, int] = {}
        self._trees: dict[str, ProcessTree] = {}
        self._since: int | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: Exception | None = None
        for name, pid in services.items():
            self.add(name, pid)

    def add(self, name: str, pid: int) -> None:
        """Follow one more service; it may be added before or after `start()`."""
        if name in self._roots:
            raise ValueError(f"resources: service {name!r} is already sampled")
        if not (self._proc / str(pid)).is_dir():
            raise ChangelakeError(
                f"resources: service {name!r} has no process {pid}",
                hint="start the service first and pass the pid of its main process",
            )
        with self._lock:
            self._roots[name] = pid
            if self._since is not None:
                self._trees[name] = ProcessTree(pid, self._since)
                self._trees[name].observe(read_processes(self._proc), self._rss)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("ResourceSampler.start() called twice")
        with self._lock:
            self._since = boot_ticks(self._proc)
            self._trees = {name: ProcessTree(pid, self._since) for name, pid in self._roots.items()}
        self._sample()
        self._thread = threading.Thread(target=self._run, name="resource-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, ServiceUsage]:
        """Stop sampling, take a last sample, and return each service's usage since `start()`."""
        if self._thread is None:
            raise RuntimeError("ResourceSampler.stop() called before start()")
        self._stopping.set()
        self._thread.join()
        if self._failure is not None:
            raise RuntimeError("the resource sampler thread failed") from self._failure
        self._sample()
        with self._lock:
            return {name: tree.usage() for name, tree in self._trees.items()}

    def _run(self) -> None:
        try:
            while not self._stopping.wait(self.interval_s):
                self._sample()
        except Exception as exc:  # a bug here must not pass for a quiet measurement
            self._failure = exc

    def _sample(self) -> None:
        processes = read_processes(self._proc)
        with self._lock:
            for tree in self._trees.values():
                tree.observe(processes, self._rss)

    def _rss(self, pid: int) -> int:
        return rss_kb(pid, self._proc)


def service_pids(settings: Settings) -> dict[str, int]:
    """The root pid of every local service that runs now, by name."""
    return {svc.name: pid for svc in manager.services(settings) if (pid := svc.pid()) is not None}


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds a process and its descendants have used so far (0 without a process)."""
    if pid is None:
        return 0.0
    processes = read_processes()
    tree = descendants(processes, pid)  # the root included
    ticks = sum(processes[p].total for p in tree if p in processes)
    return ticks / CLK_TCK


@dataclass
class Timed:
    seconds: float = 0.0
    cpu_s: float = 0.0


@contextmanager
def timed(pid: int | None) -> Iterator[Timed]:
    """Wall and CPU seconds (of `pid`'s tree) spent in the block."""
    result, started, cpu = Timed(), time.monotonic(), cpu_seconds(pid)
    yield result
    result.seconds, result.cpu_s = time.monotonic() - started, cpu_seconds(pid) - cpu
