"""Schema changes at the source, and records the pipeline cannot read."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal
from functools import reduce
from pathlib import Path

import pytest
from confluent_kafka import Producer

from changelake import kafka_io
from changelake.capture.resend import wait_resent
from changelake.changelog.registry import DEFAULT_TOPIC, SCHEMA_HEADER
from tests.integration.pipeline_fixtures import SIGNAL_TABLE, Pipeline

pytestmark = pytest.mark.stack


def test_added_column_appears_and_a_narrowed_type_stops_only_its_table(
    pipeline: Callable[..., Pipeline], unique: str
) -> None:
    grow, narrow = f"grow_{unique}", f"narrow_{unique}"
    p = pipeline(
        [grow, narrow],
        [
            f"CREATE TABLE public.{grow} (id int PRIMARY KEY, qty int)",
            f"INSERT INTO public.{grow} SELECT i, i FROM generate_series(1, 20) i",
            f"CREATE TABLE public.{narrow} (id int PRIMARY KEY, amount numeric(10,2))",
            f"INSERT INTO public.{narrow} SELECT i, i * 100.25 FROM generate_series(1, 20) i",
        ],
        views={f"{grow}_history": {"kind": "history", "table": grow}},
    )
    p.run_once()
    p.sql(f"ALTER TABLE public.{grow} ADD COLUMN note text")
    p.sql(f"ALTER TABLE public.{grow} ALTER COLUMN qty TYPE bigint")  # widening: allowed
    p.sql(f"INSERT INTO public.{grow} VALUES (100, {2**40}, 'wide ✓')")
    p.sql(f"UPDATE public.{grow} SET note = 'noted' WHERE id <= 3")
    p.sql(f"ALTER TABLE public.{narrow} ALTER COLUMN amount TYPE numeric(6,2)")
    p.sql(f"UPDATE public.{narrow} SET amount = 1.50 WHERE id = 1")

    result = p.run_once(check=False)

    assert result.returncode == 1, result.stdout + result.stderr
    assert f"table {narrow}, column amount: type changed from decimal(10,2) to decimal(6,2)" in (
        result.stdout
    ), result.stdout
    p.assert_equal(grow, ["id"])
    # Its history took the new column and the wider type too (each version as it was).
    versions = p.cli(
        "query",
        f"SELECT id, qty, note FROM {grow}_history WHERE id IN (1, 100) "
        "ORDER BY id, _valid_from_lsn",
        "--json",
    ).stdout
    assert json.loads(versions) == [
        {"id": 1, "qty": 1, "note": None},
        {"id": 1, "qty": 1, "note": "noted"},
        {"id": 100, "qty": 2**40, "note": "wide ✓"},
    ]
    kept = p.spark.read.format("delta").load(p.path(narrow)).where("id = 1").first()
    assert kept is not None and kept["amount"] == Decimal("100.25")  # stopped before the change


def _produce(bootstrap: str, topic: str, key: bytes, values: dict[bytes, dict[str, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value, headers in values.items():
        producer.produce(topic, key=key, value=value, headers=list(headers.items()))
    assert producer.flush(30) == 0


def test_bad_records_land_in_errors_and_the_rest_is_applied(
    pipeline: Callable[..., Pipeline], unique: str, bootstrap: str
) -> None:
    t = f"bad_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, amount numeric(8,2))",
            f"INSERT INTO public.{t} SELECT i, i FROM generate_series(1, 5) i",
        ],
    )
    p.run_once()
    topic = f"{p.prefix}.public.{t}"
    first = next(iter(kafka_io.read(bootstrap, topic)))
    # The shipped connector writes lean records: the payload, its schema named in a header.
    fingerprint = first.headers[SCHEMA_HEADER]
    (schema,) = [
        json.loads(r.value)
        for r in kafka_io.read(bootstrap, DEFAULT_TOPIC, raw=True)
        if r.key == fingerprint
    ]
    real = first.value
    assert set(real) >= {"before", "after", "op", "source"}, real  # no schema inline
    lean = {SCHEMA_HEADER: fingerprint}

    def edited(path: tuple[str, ...], value: object) -> bytes:
        copy = json.loads(json.dumps(real))
        reduce(lambda node, step: node[step], path[:-1], copy)[path[-1]] = value
        return json.dumps(copy).encode()

    bad: dict[bytes, tuple[dict[str, bytes], str]] = {
        b"not json at all": ({}, "not JSON"),
        json.dumps({"schema": schema}).encode(): ({}, "no payload"),
        json.dumps({"payload": real}).encode(): ({}, "no schema"),
        edited(("op",), "x"): (lean, "unknown operation: x"),
        edited(("after", "amount"), "abc"): (lean, "value does not match its schema"),
        edited(("after", "id"), 99): (
            {SCHEMA_HEADER: b"0" * 32},
            f"unknown schema fingerprint {'0' * 32}: not in topic {DEFAULT_TOPIC} after 2s",
        ),
    }
    key = json.dumps(first.key).encode()
    _produce(bootstrap, topic, key, {value: headers for value, (headers, _) in bad.items()})
    # The stock JsonConverter's form (schema inline) in the same topic is applied like the rest.
    inline = json.loads(edited(("after",), {"id": 7, "amount": 7.77}))
    inline["source"]["lsn"] += 1
    _produce(
        bootstrap, topic, key, {json.dumps({"schema": schema, "payload": inline}).encode(): {}}
    )
    p.sql(f"INSERT INTO public.{t} VALUES (6, 6.60), (7, 7.77)")
    p.sql(f"UPDATE public.{t} SET amount = -1 WHERE id = 2")
    p.sql(f"DELETE FROM public.{t} WHERE id = 3")

    p.run_once(env_extra={"CHANGELAKE_SCHEMA_WAIT_SECONDS": "2"})

    p.assert_equal(t, ["id"])
    errors = (
        p.spark.read.format("delta")
        .load(f"{p.home / 'lake'}/_errors")
        .where(f"topic = '{topic}'")
        .collect()
    )
    got = {row["value"].encode(): row["reason"] for row in errors}
    assert set(got) == set(bad)
    for value, (_, reason) in bad.items():
        assert got[value].startswith(reason), (reason, got[value])
    assert all(row["offset"] is not None and row["at"] is not None for row in errors)


def test_a_snapshot_stops_at_records_whose_schema_is_unknown(
    pipeline: Callable[..., Pipeline], unique: str, bootstrap: str
) -> None:
    t = f"noschema_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, amount numeric(8,2))",
            f"INSERT INTO public.{t} SELECT i, i FROM generate_series(1, 3) i",
        ],
    )
    p.caught_up()
    topic = f"{p.prefix}.public.{t}"
    first = next(iter(kafka_io.read(bootstrap, topic)))
    unknown = {SCHEMA_HEADER: b"f" * 32}
    _produce(
        bootstrap,
        topic,
        json.dumps(first.key).encode(),
        {json.dumps(first.value).encode(): unknown},
    )

    result = p.run_once(check=False, env_extra={"CHANGELAKE_SCHEMA_WAIT_SECONDS": "1"})

    # Dead-lettering it would make the older change of its key current: nothing is written.
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert (
        f"snapshot of {t}: 1 records cannot be read: unknown schema fingerprint {'f' * 32}" in said
    )
    assert not Path(p.path(t)).exists()


def test_values_postgres_gives_without_a_change_and_a_run_with_other_views_leave_no_gap(
    pipeline: Callable[..., Pipeline], unique: str, bootstrap: str, tmp_path: Path
) -> None:
    """Two ways the lake could miss changes with nobody told, on one pipeline:
    - issue 42: `ADD COLUMN … DEFAULT` and `RENAME COLUMN` change every row at the source without
      a change event; the pipeline has the rows no change touched re-sent;
    - issue 41: a run whose views file reads a table no more still keeps its stored history
      current, so the view reading it again later misses none of that run's changes."""
    docs, kept = f"docs_{unique}", f"kept_{unique}"
    p = pipeline(
        [docs, kept],
        [
            f"CREATE TABLE public.{docs} (id int PRIMARY KEY, title text)",
            f"INSERT INTO public.{docs} SELECT i, 'title ' || i FROM generate_series(1, 40) i",
            f"CREATE TABLE public.{kept} (id int PRIMARY KEY, qty int)",
            f"INSERT INTO public.{kept} VALUES (1, 10)",
        ],
        views={f"{kept}_history": {"kind": "history", "table": kept}},
    )
    p.run_once()
    p.sql(f"ALTER TABLE public.{docs} ADD COLUMN locale text NOT NULL DEFAULT 'en'")
    p.sql(f"ALTER TABLE public.{docs} RENAME COLUMN title TO subject")
    p.sql(f"UPDATE public.{docs} SET subject = 'changed' WHERE id = 1")  # carries the new columns
    p.sql(f"UPDATE public.{kept} SET qty = 11 WHERE id = 1")
    no_views = tmp_path / "no-views.json"
    no_views.write_text(json.dumps({"views": {}}))

    between = p.run_once(env_extra={"CHANGELAKE_VIEWS_CONFIG": str(no_views)}).stdout
    assert f"{docs}: columns subject, locale were added at the source" in between, between
    assert f"{kept}: its history is kept current though views.json reads it no more" in between
    found = re.search(r"\(signal ([0-9a-f-]{36})\)", between)
    assert found, between
    connector = p.prefix.replace("_", "-")
    wait_resent(p.dsn, bootstrap, connector, SIGNAL_TABLE, found[1], {}, 120, print)
    p.sql(f"UPDATE public.{kept} SET qty = 12 WHERE id = 1")
    p.run_once()

    assert p.assert_equal(docs, ["id"]) == 40  # subject and locale in every row, as the source
    shown = json.loads(p.cli("status", "--json", check=False).stdout)["tables"]
    assert shown[docs]["dropped_columns"] == ["title"]  # kept with its last values, and said
    assert shown[kept]["dropped_columns"] == []
    versions = p.cli("query", f"SELECT qty FROM {kept}_history ORDER BY _valid_from_lsn", "--json")
    assert [v["qty"] for v in json.loads(versions.stdout)] == [10, 11, 12]
