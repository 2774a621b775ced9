"""The search index follows the same changelog as the Delta table, against real OpenSearch:
snapshot, updates, TOAST placeholders, deletes, key changes, rejected documents, replays of older
events, truncate; and (a slow proof: `make chaos`, and CI) an OpenSearch outage in the middle of a
batch, and a reindex under load."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import functions as F

from changelake import kafka_io
from changelake.apply.batch import TableApplier
from changelake.apply.connector_batch import ConnectorBatch, Member
from changelake.changelog.registry import registry
from changelake.search.client import SearchClient
from changelake.search.config import load_specs
from changelake.settings import Settings
from changelake.sinks.search import SearchSink
from changelake.tables import TableRef
from tests.integration.pipeline_fixtures import Pipeline
from tests.search_compare import differences, doc_id, documents
from tests.support import changelake, wait_for

pytestmark = pytest.mark.stack

FIELDS = {
    "name": "text",
    "body": "text",
    "tags": "keyword",
    "price": "numeric",
    "code": "numeric",  # text in Postgres: a value that is not a number is refused by OpenSearch
    "in_stock": "boolean",
    "updated_at": "date",
}
KEY = ["shop", "sku"]


def ddl(t: str) -> list[str]:
    return [
        f"CREATE TABLE public.{t} (shop int, sku text, name text, body text, tags text[],"
        " price numeric(10,2), code text, in_stock boolean, updated_at timestamptz,"
        " PRIMARY KEY (shop, sku))",
        # DEFAULT replica identity: an update that leaves body alone sends the TOAST placeholder.
        f"ALTER TABLE public.{t} ALTER COLUMN body SET STORAGE EXTERNAL",
        f"INSERT INTO public.{t} SELECT i % 3, 'S' || i, 'item ' || i,"
        " CASE WHEN i IN (7, 8) THEN 'a rare zanzibarquux inside ' || i"
        "      WHEN i % 5 = 0 THEN repeat('lorem ipsum ' || i, 1000) ELSE 'short body ' || i END,"
        " ARRAY['t' || (i % 4), 'all'], i * 1.25,"
        " CASE WHEN i = 9 THEN 'abc' ELSE (i * 3)::text END,"
        " i % 2 = 0, timestamptz '2026-01-01 00:00:00+00' + i * interval '1 hour 1.5 second'"
        " FROM generate_series(1, 40) i",
    ]


def key_of(p: Pipeline, t: str, sku: str) -> str:
    with psycopg.connect(p.dsn) as conn:
        row = conn.execute(f"SELECT shop, sku FROM public.{t} WHERE sku = %s", (sku,)).fetchone()
    return doc_id(row)


def search_ids(p: Pipeline, t: str, text: str, *args: str) -> tuple[set[str], list[dict[str, Any]]]:
    out = p.cli("search", text, "--tables", t, "--json", "--limit", "50", *args)
    hits = json.loads(out.stdout)["hits"]
    return {h["id"] for h in hits}, hits


def errors_about(p: Pipeline, index_alias: str) -> list[str]:
    errors = p.spark.read.format("delta").load(str(p.home / "lake" / "_errors"))
    rows = errors.where(F.col("reason").contains(index_alias)).select("reason", "value").collect()
    return [f"{r.reason} | {r.value}" for r in rows]


def test_index_follows_snapshot_changes_replays_and_truncate(
    pipeline: Callable[..., Pipeline], unique: str, settings: Settings
) -> None:
    t = f"search_{unique}"
    p = pipeline([t], ddl(t), search={t: FIELDS})
    client = SearchClient.of(settings)
    alias = p.alias(t)

    def same(*skip: str) -> None:
        diff = differences(client, alias, p.dsn, f"public.{t}", KEY, list(FIELDS), skip)
        assert diff == [], "\n".join(diff)

    # The snapshot bulk-loads the index; the one document OpenSearch refuses is in _errors.
    p.run_once()
    s9 = key_of(p, t, "S9")
    same(s9)
    assert s9 not in documents(client, alias)
    refused = errors_about(p, alias)
    assert len(refused) == 1 and s9 in refused[0] and "abc" in refused[0], refused
    ids, hits = search_ids(p, t, "zanzibarquux")
    assert ids == {key_of(p, t, "S7"), key_of(p, t, "S8")}
    assert all("<em>zanzibarquux</em>" in " ".join(h["highlight"]["body"]) for h in hits)
    in_stock, _ = search_ids(p, t, "", "--filter", "in_stock=true", "--filter", "price<=10")
    assert in_stock == {key_of(p, t, f"S{i}") for i in (2, 4, 6, 8)}

    # Changes: new text replaces old, a TOASTed body survives an update that did not touch it,
    # a delete disappears, a key change moves the document, a refused update is reported.
    s7, s8, s10, s12 = (key_of(p, t, s) for s in ("S7", "S8", "S10", "S12"))
    p.sql(f"UPDATE public.{t} SET body = 'now about quokkaflight' WHERE sku = 'S7'")
    p.sql(f"UPDATE public.{t} SET price = price + 1, tags = '{{}}' WHERE sku = 'S10'")
    p.sql(f"DELETE FROM public.{t} WHERE sku = 'S8'")
    p.sql(f"UPDATE public.{t} SET sku = 'S11x' WHERE sku = 'S11'")
    p.sql(
        f"INSERT INTO public.{t} VALUES (5, 'S100', 'brand new', 'fresh quokkaflight', NULL,"
        " 0.01, '0', NULL, NULL)"
    )
    p.sql(f"UPDATE public.{t} SET code = 'xyz', name = 'never indexed' WHERE sku = 'S12'")
    p.run_once()
    same(s9, s12)
    assert documents(client, alias)[s10]["body"].startswith("lorem ipsum 10")
    assert documents(client, alias)[s12]["name"] == "item 12"  # the refused update left it
    assert len(errors_about(p, alias)) == 2
    assert search_ids(p, t, "zanzibarquux")[0] == set()
    assert search_ids(p, t, "quokkaflight")[0] == {s7, key_of(p, t, "S100")}
    assert s8 not in documents(client, alias)

    # A replay of older events (through the real apply path, under another application id, so
    # Delta's own idempotence does not skip it) regresses nothing: OpenSearch refuses them.
    high = kafka_io.watermarks(settings.kafka_bootstrap, f"{p.prefix}.public.{t}")[0][1]
    for price in (1, 2, 3):
        p.sql(f"UPDATE public.{t} SET price = {price}, name = 'v{price}' WHERE sku = 'S13'")
    p.run_once()
    end = kafka_io.watermarks(settings.kafka_bootstrap, f"{p.prefix}.public.{t}")[0][1]
    stats = replay(p, settings, t, high, end - 1)
    assert stats["stale"] >= 1 and stats["indexed"] == 0, stats
    same(s9, s12)
    p.assert_equal(t, KEY)

    # A truncate empties the index; rows inserted after it are all that remain.
    p.sql(f"TRUNCATE public.{t}")
    p.sql(f"INSERT INTO public.{t} (shop, sku, name) VALUES (1, 'after', 'after the truncate')")
    p.run_once()
    assert set(documents(client, alias)) == {doc_id([1, "after"])}
    same()


def replay(p: Pipeline, settings: Settings, t: str, start: int, end: int) -> dict[str, Any]:
    """Apply the records [start, end) of the table's topic once more, in this process."""
    topic = f"{p.prefix}.public.{t}"
    raw = (
        p.spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", json.dumps({topic: {"0": start}}))
        .option("endingOffsets", json.dumps({topic: {"0": end}}))
        .load()
    )
    spec = load_specs(p.home / "search.json")[t]
    ref = TableRef("public", t, topic, "replay", p.prefix, search=spec)
    client = SearchClient.of(settings)
    seen: dict[str, Any] = {}
    applier = TableApplier(
        p.spark,
        ref,
        str(p.home / "lake"),
        "changelake-test/replay",
        lambda _table, stats: seen.update(stats),
        Path(p.home / "replay-run"),
        settings.kafka_bootstrap,
        registry(settings.kafka_bootstrap, ref.schemas_topic, settings.schema_wait_s),
        SearchSink(client, spec, topic, print),
    )
    batch = ConnectorBatch({topic: Member(applier)}, p.spark.sparkContext)
    try:
        batch(raw, 0)
    finally:
        batch.close(0)
    return seen


@pytest.mark.chaos  # an outage: `make chaos` and CI run it, beside the chaos run's own
def test_index_catches_up_after_an_outage_and_reindexes_under_load(
    pipeline: Callable[..., Pipeline], unique: str, settings: Settings
) -> None:
    t = f"outage_{unique}"
    p = pipeline([t], ddl(t), search={t: FIELDS})
    client = SearchClient.of(settings)
    alias = p.alias(t)
    s9 = key_of(p, t, "S9")

    def index_equal() -> bool:
        try:
            return not differences(client, alias, p.dsn, f"public.{t}", KEY, list(FIELDS), {s9})
        except Exception:  # the index is not there yet, or OpenSearch is starting
            return False

    def streaming() -> bool:  # the index is built and recorded; the stream starts next
        return index_equal() and bool(SearchSink(client, spec, topic, print).state())

    spec = load_specs(p.home / "search.json")[t]
    topic = f"{p.prefix}.public.{t}"
    # A retry budget far shorter than any restart of OpenSearch: the batch in flight fails, and
    # the restarted table catches its index up from the Delta table before streaming again.
    proc = p.start("--trigger-seconds", "1", env_extra={"CHANGELAKE_SEARCH_RETRY_SECONDS": "2"})
    try:
        wait_for(streaming, 240, "the snapshot to be searchable")

        # OpenSearch stops; the next batch commits to Delta and then waits on OpenSearch.
        changelake("stack", "down", "opensearch")
        try:
            # One transaction, so one batch: a second batch would wait for the first, which
            # waits for OpenSearch, and never reach Delta during the outage.
            p.sql(
                f"UPDATE public.{t} SET name = 'during the outage' WHERE sku = 'S1';"
                f"DELETE FROM public.{t} WHERE sku IN ('S2', 'S3');"
                f"INSERT INTO public.{t} (shop, sku, name) VALUES (9, 'S900', 'outage insert')"
            )
            p.wait_equal(t, KEY)  # the batch is mid-flight: Delta has it, the index cannot
        finally:
            changelake("stack", "up", "opensearch")
        wait_for(index_equal, 240, "the index to catch up after OpenSearch came back")

        # A reindex while the pipeline runs and the source changes: the alias moves to a new
        # generation that ends up equal to the source too.
        before = client.alias_indexes(alias)
        p.sql(f"UPDATE public.{t} SET name = 'before reindex' WHERE sku = 'S4'")
        p.cli("reindex", "--tables", t)
        p.sql(f"UPDATE public.{t} SET name = 'after reindex' WHERE sku = 'S5'")
        p.sql(f"DELETE FROM public.{t} WHERE sku = 'S6'")
        wait_for(index_equal, 180, "the reindexed index to equal the source")
        after = client.alias_indexes(alias)
        assert len(after) == 1 and after != before
        assert not client.request("GET", f"/{before[0]}", missing_ok=True)  # old one removed
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, output
    assert "opensearch: OpenSearch is not reachable" in output, output
    assert f"{t}: batch failed (" in output, output
    assert f"{t}: the index is behind its table; sending what changed between versions" in (
        output
    ), output
