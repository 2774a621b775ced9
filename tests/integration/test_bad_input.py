"""Bad input against the real stack: a topic deleted or a source table dropped under a running
pipeline, a lake that cannot be written, a wrong password. Each gives a message that names
what happened, a non-zero exit, and a derived table left exactly as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from changelake import kafka_io
from changelake.apply.pipeline_file import pipeline_state
from changelake.lake.table import read_table
from changelake.settings import Settings
from tests.integration.pipeline_fixtures import Pipeline
from tests.support import changelake, free_port, wait_for

pytestmark = pytest.mark.stack


def ddl(t: str) -> list[str]:
    return [
        f"CREATE TABLE public.{t} (id int PRIMARY KEY, name text)",
        f"INSERT INTO public.{t} SELECT i, 'row ' || i FROM generate_series(1, 50) i",
    ]


def lake_rows(p: Pipeline, t: str) -> list[tuple[int, str]]:
    frame = read_table(p.spark, p.path(t)).rows.select("id", "name").orderBy("id")
    return [(int(r[0]), str(r[1])) for r in frame.collect()]


def ended(proc: subprocess.Popen[str], timeout_s: float = 240) -> str:
    """The output of a streaming run that must end by itself (its only table stopped)."""
    try:
        return proc.communicate(timeout=timeout_s)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"the run did not stop:\n{proc.communicate()[0]}") from None


def test_a_deleted_topic_then_a_dropped_source_table_each_stop_only_their_table(
    pipeline: Callable[..., Pipeline], unique: str, settings: Settings
) -> None:
    """One streaming run: a table's topic deleted stops that table (verify and the metrics say
    so) while the other goes on; then the other's source table dropped stops it after its last
    changes arrived, and the run, with no table left, ends by itself."""
    t, other = f"lost_topic_{unique}", f"dropped_{unique}"
    p = pipeline([t, other], [*ddl(t), *ddl(other)])
    topic = f"{p.prefix}.public.{t}"
    port = free_port()
    proc = p.start("--trigger-seconds", "1", "--metrics-port", str(port))
    try:
        p.wait_equal(t, ["id"])
        before = lake_rows(p, t)

        kafka_io.delete_topics(settings.kafka_bootstrap, [topic])
        wait_for(lambda: t in _stopped(settings), 240, f"{t} stopped")
        # The other table goes on, and verify compares it, naming the stopped one unverified.
        p.sql(f"UPDATE public.{other} SET name = 'after' WHERE id <= 5")
        verified = p.cli("verify", "--json", "--timeout", "120", check=False)
        assert verified.returncode == 3, verified.stdout + verified.stderr
        report = {r["table"]: r for r in json.loads(verified.stdout)["tables"]}
        assert report[other]["equal"] and report[other]["delta"]["rows"] == 50
        assert not report[t]["equal"]
        assert f"its topic {topic} was deleted" in report[t]["stopped"], report[t]

        # Its Prometheus metrics say what `status` says.
        status = json.loads(p.cli("status", "--json", check=False).stdout)["tables"]
        metrics = scrape(port)
        state = metrics["changelake_table_state"]
        assert state[(("state", "stopped"), ("table", t))] == 1
        assert status[t]["state"] == "stopped"
        assert state[(("state", "running"), ("table", other))] == 1
        assert status[other]["state"] == "running"
        lsn = metrics["changelake_table_applied_lsn"][(("table", other),)]
        assert lsn == status[other]["applied_lsn"] > 0
        assert metrics["changelake_table_dead_letters_total"][(("table", other),)] == 0
        assert metrics["changelake_table_changes_total"][(("table", other),)] >= 5

        # The other's last changes, then its source table dropped.
        p.sql(f"UPDATE public.{other} SET name = 'last words' WHERE id <= 5")
        p.sql(f"INSERT INTO public.{other} SELECT i, 'late ' || i FROM generate_series(51, 60) i")
        with psycopg.connect(p.dsn) as conn:
            final = conn.execute(f"SELECT id, name FROM public.{other} ORDER BY id").fetchall()
        # Debezium must have read them first: on events of a table dropped before it read them
        # it cannot look up the key, sends key-less records the compacted topic refuses, and
        # fails (run then stops the table after a grace period, saying the last changes may be
        # missing).
        p.caught_up()
        p.sql(f"DROP TABLE public.{other}")
        output = ended(proc)  # every table stopped: the run ends by itself
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            ended(proc)
    assert proc.returncode == 1, output
    # "… was deleted from Kafka", or "… was deleted and created again" when the watch first sees
    # the topic after something (Connect) made it anew: the table stops, naming the loss, either way
    assert f"{t}: STOPPED: its topic {topic} was deleted" in output, output
    assert f"changelake run --resnapshot {t}" in output
    assert lake_rows(p, t) == before  # nothing lost, nothing half-written
    assert f"{other}: STOPPED: its source table public.{other} was dropped" in output, output
    assert "the Delta table keeps every change captured before that" in output
    assert lake_rows(p, other) == [(int(i), str(n)) for i, n in final]  # its last changes arrived

    again = p.run_once(check=False)  # a restart refuses too: it cannot continue from nothing
    assert again.returncode == 1
    assert f"its topic {topic} was deleted from Kafka" in again.stdout, again.stdout
    assert lake_rows(p, t) == before


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Each sample of the run's /metrics, by name and sorted labels."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def _stopped(settings: Settings) -> list[str]:
    """The tables the running pipeline has stopped."""
    _, states = pipeline_state(settings)
    return [name for name, s in states.items() if s["state"] == "stopped"]


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """A directory nobody may write, root included (permission bits do not stop root)."""
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_lake_that_cannot_be_written_is_named_and_left_untouched(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    t = f"readonly_{unique}"
    p = pipeline([t], ddl(t))
    lake = p.home / "lake"
    lake.mkdir()
    with immutable(lake):
        result = p.run_once(check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"the lake directory {lake} is not writable" in result.stderr, result.stderr
    assert "CHANGELAKE_LAKE" in result.stderr  # what to do
    assert list(lake.iterdir()) == []
    assert not (p.home / "checkpoints").exists()


def test_a_wrong_password_is_named_and_nothing_is_written(admin_dsn: str) -> None:
    with psycopg.connect(admin_dsn) as conn:
        before = conn.execute("SELECT count(*) FROM public.customers").fetchone()
    # The demo writes as the stack's admin; verify reads the source as the connector's user.
    for command, variable, user in (
        (["demo", "seed", "--rows", "10"], "CHANGELAKE_PG_PASSWORD", "changelake"),
        (["verify"], "CHANGELAKE_DEBEZIUM_PASSWORD", "debezium"),
        (["demo", "load"], "CHANGELAKE_PG_PASSWORD", "changelake"),
    ):
        env = {**os.environ, variable: "not-the-password"}
        result = changelake(*command, check=False, env=env)
        assert result.returncode == 1, command
        assert "cannot connect to Postgres at 127.0.0.1:" in result.stderr, result.stderr
        assert f'password authentication failed for user "{user}"' in result.stderr
        assert "not-the-password" not in result.stderr + result.stdout
    with psycopg.connect(admin_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM public.customers").fetchone() == before
