"""A table added to the connector while the pipeline streams is snapshotted (Debezium's incremental
snapshot through the signal table) and joins the run; the other tables never stop. Queries run
in the run's session, found by its served.json or, as from a container's host, at its endpoint."""

from __future__ import annotations

import json
import re
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from changelake import kafka_io
from tests.integration.pipeline_fixtures import SIGNAL_TABLE, Pipeline
from tests.support import CLI, free_port, wait_for

pytestmark = pytest.mark.stack
RESEND_S = 10.0  # how long an ignored snapshot signal waits before it is sent again


def test_table_added_later_joins_a_streaming_run(
    pipeline: Callable[..., Pipeline], unique: str, tmp_path: Path
) -> None:
    first, later = f"first_{unique}", f"later_{unique}"
    p = pipeline(
        [first],
        [
            f"CREATE TABLE public.{first} (id int PRIMARY KEY, v text)",
            f"INSERT INTO public.{first} SELECT i, 'v' || i FROM generate_series(1, 20) i",
            f"CREATE TABLE public.{later} (id int PRIMARY KEY, amount numeric(9,2))",
            f"INSERT INTO public.{later} SELECT i, i / 4.0 FROM generate_series(1, 300) i",
        ],
    )
    p.tables.append(later)  # dropped at the end too
    p.caught_up()
    token, port = secrets.token_urlsafe(16), free_port()
    endpoint = {"CHANGELAKE_SPARK_CONNECT_TOKEN": token, "CHANGELAKE_METRICS_PORT": str(port)}
    proc = p.start("--trigger-seconds", "1", "--ui", env_extra=endpoint)
    try:
        p.wait_equal(first, ["id"])

        (connector,) = (p.home / "connectors").glob("*.json")
        doc = json.loads(connector.read_text())
        doc["config"]["table.include.list"] = f"public.{first},public.{later},{SIGNAL_TABLE}"
        connector.write_text(json.dumps(doc))
        p.cli("connectors", "apply", str(connector))
        topic = f"{p.prefix}.public.{later}"

        sent_at = [float("-inf")]

        def snapshot_requested() -> bool:
            # Connect may restart the task with the new config just after `apply` returns; a
            # signal the old task reads is ignored (the table is not in its list): so the signal
            # is sent again every RESEND_S until the new table's topic exists.
            if topic in kafka_io.list_topics(p.settings.kafka_bootstrap, topic):
                return True
            if time.monotonic() - sent_at[0] >= RESEND_S:
                sent_at[0] = time.monotonic()
                p.sql(
                    f"INSERT INTO {SIGNAL_TABLE} VALUES (%s, 'execute-snapshot', %s)",
                    (str(uuid.uuid4()), json.dumps({"data-collections": [f"public.{later}"]})),
                )
            return False

        wait_for(snapshot_requested, 120, f"Debezium to snapshot {later}")
        p.sql(f"UPDATE public.{first} SET v = 'during' WHERE id % 3 = 0")
        p.sql(f"UPDATE public.{later} SET amount = -amount WHERE id % 10 = 0")
        p.sql(f"DELETE FROM public.{later} WHERE id > 290")

        assert p.wait_equal(later, ["id"], timeout_s=240) == 290
        p.sql(f"INSERT INTO public.{first} VALUES (100, 'after')")
        p.wait_equal(first, ["id"])
        queried_through_the_run(p, first, later, {})
        # From where served.json cannot be read (a container's host: another home), through
        # the run's endpoint with the token both know.
        elsewhere = {**endpoint, "CHANGELAKE_HOME": str(tmp_path)}
        p.sql(f"UPDATE public.{first} SET v = 'from elsewhere' WHERE id = 100")
        queried_through_the_run(p, first, later, elsewhere)
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, output
    assert f"{later}: added to" in output and f"{later}: snapshot" in output, output
    ui = r" INFO +Spark UI at http://(localhost|127\.0\.0\.1):\d+$"  # a logged line
    assert re.search(ui, output, re.M), output


def queried_through_the_run(p: Pipeline, first: str, later: str, env: dict[str, str]) -> None:
    """`changelake query` (with `env`) answers from the running pipeline's session (Spark
    Connect): it needs no Java of its own (JAVA_HOME points nowhere), and sees both tables, the
    one that joined later too, as the source has them."""
    sql = (
        f"SELECT 'first' AS t, id, v AS value FROM {first} UNION ALL "
        f"SELECT 'later', id, CAST(amount AS STRING) FROM {later} ORDER BY t, id"
    )
    with psycopg.connect(p.dsn) as conn:
        want = [("first", i, v) for i, v in conn.execute(f"SELECT id, v FROM public.{first}")]
        want += [
            ("later", i, str(a)) for i, a in conn.execute(f"SELECT id, amount FROM public.{later}")
        ]

    last = [""]

    def answered() -> bool:
        done = subprocess.run(
            [*CLI, "query", sql, "--json"],
            env={**p.env, **env, "JAVA_HOME": "/nonexistent"},  # a local session needs Java
            capture_output=True,
            text=True,
            check=False,
        )
        last[0] = done.stderr[-2000:] if done.returncode else done.stdout[-2000:]
        if done.returncode:
            return False
        got = [(r["t"], r["id"], r["value"]) for r in json.loads(done.stdout)]
        return got == sorted(want)  # the view trails a commit by a tick

    try:
        wait_for(answered, 30, "the served views to show the source's rows")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last query said:\n{last[0]}") from None
