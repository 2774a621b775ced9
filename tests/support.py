"""Helpers the tests share: run the real CLI, wait on a condition with a deadline, a database
of a test's own."""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import random
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "changelake.cli"]


def changelake(
    *args: str, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real command line, as a user would."""
    result = subprocess.run(
        [*CLI, *args],
        cwd=ROOT,
        capture_output=True,
        stdin=subprocess.DEVNULL,  # no terminal: nothing may wait for an answer
        text=True,
        timeout=timeout,
        env=env if env is not None else dict(os.environ),
    )
    return _checked(result, args, check)


def _checked(
    result: subprocess.CompletedProcess[str], args: tuple[str, ...], check: bool
) -> subprocess.CompletedProcess[str]:
    if check and result.returncode != 0:
        raise AssertionError(
            f"changelake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        )
    return result


def changelake_here(
    *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The same command line, run in this process: its Spark work goes to the suite's one warm
    session instead of a new JVM (a `run --once` of a small table: ~40 s as a process, a few
    seconds here). For what needs a process of its own (killed runs, exit paths), use changelake.
    """
    from changelake import cli

    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    result = subprocess.CompletedProcess(
        ["changelake", *args], code, out.getvalue(), err.getvalue()
    )
    return _checked(result, args, check)


POLL_INTERVAL_S = 0.2  # how often a waiting test re-checks its condition


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (a service started next binds it), below the kernel's
    ephemeral range: a port the kernel hands out for port 0 (as it did once to the Spark JVM's
    py4j gateway, started between this call and the service's bind) could be taken again by any
    process in that window; one below the range is taken only by a process that asks for it."""
    low = _ephemeral_low()
    for port in random.sample(range(max(1024, low - 8000), low), 200):
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on {host} below {low}")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def wait_for(check: Callable[[], Any], timeout_s: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(POLL_INTERVAL_S)


# A connector that acknowledges records one at a time (one per produce request, one request in
# flight) and polls them in hundreds: a few thousand records a second instead of tens of
# thousands, so a one-second offset flush lands inside a bulk transaction's COPY, and a graceful
# stop, which still sends and commits what was polled, overshoots by a few hundred at most.
SLOW_ACKS = {
    "producer.override.batch.size": "0",
    "producer.override.linger.ms": "0",
    "producer.override.max.in.flight.requests.per.connection": "1",
    "max.batch.size": "100",
    "max.queue.size": "200",
}


@contextlib.contextmanager
def scratch_database(admin_dsn: str, name: str) -> Iterator[str]:
    """A new database `name` on the stack's Postgres, its DSN; dropped afterwards with the
    replication slots left in it."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(admin_dsn, dbname=name)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE database = %s AND NOT active",
                (name,),
            )
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pom_property(pom: Path, name: str) -> str:
    """One of pom.xml's <properties>, where every version is declared."""
    found = ET.parse(pom).getroot().find(f"m:properties/m:{name}", POM_NS)
    assert found is not None and found.text, f"pom.xml has no <{name}>"
    return found.text.strip()


POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def dies_with_the_suite() -> None:
    """In a child process, before it runs: have Linux send it SIGTERM when the test process ends.
    A suite killed midway runs no teardown, and a `changelake run` it started would go on
    serving a lake no test reads, holding the home's served.json (the next run's queries then
    fail to reach their own pipeline) and two cores' worth of CPU. (Linux sends it when the
    thread that started the child ends: start children from the test's own thread.)"""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
