"""The `changelake` command: parse, call, print. No logic of its own."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.apply.run_options import DEFAULTS, RunOptions
from pipelines.exceptions import ChangelakeError, ConfigError
from pipelines.settings import Settings, load_settings

if TYPE_CHECKING:  # the benchmark's modules load only for `changelake bench`
    from pipelines.bench.command import BenchOptions

Handler = Callable[[argparse.Namespace, Settings], int]


def _setup(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.stack.install import setup

    setup(settings)
    return 0


def _stack(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.stack import manager

    if args.action == "up":
        manager.up(settings, args.services or None)
    elif args.action == "down":
        manager.down(settings, args.services or None)
    else:
        report = manager.status(settings)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            _print_stack_status(report)
        return 0 if all(s["state"] == "healthy" for s in report["services"].values()) else 3
    return 0


def _print_stack_status(report: dict[str, Any]) -> None:
    from pipelines.stack.manager import describe_endpoint

    print(f"state directory: {report['home']}")
    for name, svc in report["services"].items():
        where = describe_endpoint(svc)
        pid = svc["pid"] or "-"
        print(f"  {name:<11} {svc['state']:<22} pid {pid!s:<8} {where}")


def _connectors(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.capture import connectors, removal

    if args.action == "apply":
        files = [Path(f) for f in args.files] or connectors.default_files(settings)
        connectors.apply(settings, files, timeout_s=args.timeout)
    elif args.action == "delete":
        removal.delete(settings, args.name, drop_slot=args.drop_slot)
    else:
        report = connectors.status(settings)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            connectors.print_status(report)
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.demo import load, seed
    from pipelines.stack.postgres import Postgres

    dsn = Postgres(settings).admin_dsn()
    if args.action == "seed":
        report = seed.seed(dsn, args.rows)
        print(report.summary())
    else:
        result = load.run_load(dsn, args.rate, args.seconds)
        print(result.summary())
    return 0


def _topics(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.capture import topics

    topics.show(settings, prefix=args.prefix, sample=args.sample, wait=args.wait)
    return 0


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines import tables
    from pipelines.apply import run_command

    if args.master:
        settings = dataclasses.replace(settings, spark_master=args.master)
    refs = tables.captured(settings, _names(args.tables) or None)
    options = RunOptions(
        once=args.once,
        resnapshot=tuple(_names(args.resnapshot)),
        trigger_seconds=args.trigger_seconds,
        compact_seconds=args.compact_seconds,
        max_records_per_batch=args.max_records,
    )
    tables.captured(settings, list(options.resnapshot) or None)  # names must exist

    def discover() -> list[tables.TableRef]:  # tables added to the connector files later
        return tables.captured(settings, _names(args.tables) or None)

    return run_command.run(settings, refs, options, discover=discover)


def _query(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.read import query

    columns, rows = query.run_query(settings, args.sql)
    if args.json:
        print(query.format_json(columns, rows))
    elif args.csv:
        print(query.format_csv(columns, rows), end="")
    else:
        print(query.format_table(columns, rows))
    return 0


def _status(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines.read import status
    from pipelines.spark import session

    spark = session(settings, app="changelake-status")
    spark.sparkContext.setLogLevel("FATAL")
    report = status.collect(settings, spark)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        status.print_report(report)
    return 0


def _search(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines import tables
    from pipelines.search import find
    from pipelines.search.client import SearchClient
    from pipelines.search.config import alias_for

    only = _names(args.table) or None
    indexed = [r for r in tables.captured(settings, only) if r.search is not None]
    if not indexed:
        raise ConfigError(
            f"no indexed table{' named ' + args.table if args.table else ''}",
            "declare it under indexes in schemas/search.json",
        )
    aliases = {alias_for(r.topic): r.search for r in indexed if r.search is not None}
    tty = sys.stdout.isatty()
    tags = find.JSON_TAGS if args.json else (("\x1b[1;33m", "\x1b[0m") if tty else ("**", "**"))
    client = SearchClient(settings.opensearch_url, retry_for_s=0)
    total, hits = find.search(client, aliases, args.text, args.filter, args.limit, tags)
    if args.json:
        print(find.format_json(total, hits))
    else:
        specs = {spec.table: spec for spec in aliases.values()}
        print(find.format_text(args.text, total, hits, specs))
    return 0


def _reindex(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines import tables
    from pipelines.read.reindex import reindex
    from pipelines.search.client import SearchClient
    from pipelines.sinks.search import SearchSink
    from pipelines.spark import owned_session

    (ref,) = tables.captured(settings, [args.table])
    if ref.search is None:
        raise ConfigError(
            f"{args.table} is not indexed",
            "declare it under indexes in schemas/search.json",
        )
    client = SearchClient(settings.opensearch_url, say=print)
    client.request("GET", "/")  # name OpenSearch now, before Spark starts, if it is down
    with owned_session(settings, app="changelake-reindex") as spark:
        sink = SearchSink(client, ref.search, ref.topic, print)
        done = reindex(spark, ref, settings.lake, sink, print)
    print(
        f"{ref.name}: {done.docs:,} documents in {done.index} ({done.seconds:.1f}s, "
        f"{done.docs / max(done.seconds, 1e-9):,.0f} docs/s); {done.caught_up:,} changes made "
        f"meanwhile replayed; alias {sink.alias} now points at it"
    )
    return 0


def _reachable(settings: Settings) -> None:
    from pipelines import kafka_io, pg
    from pipelines.stack.postgres import Postgres

    pg.connect(Postgres(settings).admin_dsn()).close()
    kafka_io.list_topics(settings.kafka_bootstrap)


def _verify(args: argparse.Namespace, settings: Settings) -> int:
    from pipelines import tables
    from pipelines.read.verify.command import print_report
    from pipelines.read.verify.repair import verify_repairing
    from pipelines.spark import owned_session

    refs = tables.captured(settings, _names(",".join(args.tables)) or None)
    say = (lambda text: print(text, file=sys.stderr)) if args.json else print
    _reachable(settings)  # before the Spark session: a service down is named in a second
    with owned_session(settings, app="changelake-verify") as spark:
        spark.sparkContext.setLogLevel("FATAL")
        passes = args.passes if args.repair else 0
        checks = verify_repairing(settings, spark, refs, say, args.timeout, args.range_rows, passes)
    equal = all(c.equal for c in checks)
    if args.json:
        doc = {"equal": equal, "tables": [c.as_dict() for c in checks]}
        print(json.dumps(doc, indent=2, default=str))
    else:
        print_report(checks, print)
        print("verify: " + ("everything equals the source" if equal else "DIFFERENCES FOUND"))
    return 0 if equal else 1


def _chaos(args: argparse.Namespace, settings: Settings) -> int:
    import os
    from datetime import UTC, datetime

    from pipelines.chaos.faults import KINDS
    from pipelines.chaos.runner import Chaos, ChaosOptions
    from pipelines.chaos.workload import BackgroundLoad
    from pipelines.stack.postgres import Postgres

    out_dir = settings.home / "chaos" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    options = ChaosOptions(rounds=args.rounds, rate=args.rate, seed=args.seed)
    print(f"chaos: {options.rounds} rounds of {len(KINDS)} faults under load; logs in {out_dir}")
    dsn = Postgres(settings).admin_dsn()

    def workload(seed: int) -> BackgroundLoad:
        return BackgroundLoad(dsn, options.rate, seed, print)

    chaos = Chaos(settings, os.environ, workload, out_dir, print)
    summary = chaos.run(options)
    print(json.dumps(summary.as_dict(), indent=2) if args.json else summary.text())
    return 1 if summary.differences else 0


def bench_options(args: argparse.Namespace) -> BenchOptions:
    """The flags given; the others keep BenchOptions' defaults, declared there only."""
    from pipelines.bench.command import BenchOptions

    names = [f.name for f in dataclasses.fields(BenchOptions)]  # the flags' `dest`s
    return BenchOptions(**{name: getattr(args, name) for name in names if hasattr(args, name)})


def _bench(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime

    from pipelines.bench.command import Bench

    options = bench_options(args)
    out_dir = settings.home / "bench" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    print(f"bench: results and logs in {out_dir}")
    Bench(settings, options, out_dir, lambda line: print(line, flush=True)).run()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="changelake",
        description="Postgres → Debezium → Kafka → Delta Lake and OpenSearch, kept in step.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("setup", help="install the local stack's services once (make setup)")
    p.set_defaults(handler=_setup)

    p = sub.add_parser("stack", help="run the local services: up | down | status")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("services", nargs="*", help="postgres, kafka, connect, opensearch (default all)")
    p.add_argument("--json", action="store_true", help="status as JSON, for programs")
    p.set_defaults(handler=_stack)

    p = sub.add_parser("connectors", help="apply | status | delete Kafka Connect connectors")
    csub = p.add_subparsers(dest="action", required=True)
    c = csub.add_parser("apply", help="validate, then create or update connectors from JSON")
    c.add_argument("files", nargs="*", help="connector JSON files (default: connectors/*.json)")
    c.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for RUNNING")
    c = csub.add_parser("status", help="each connector's and task's state")
    c.add_argument("--json", action="store_true")
    c = csub.add_parser("delete", help="remove a connector and the offsets Connect stored for it")
    c.add_argument("name")
    c.add_argument("--drop-slot", action="store_true", help="also drop its replication slot")
    p.set_defaults(handler=_connectors)

    p = sub.add_parser("demo", help="the demo shop: seed rows, run a workload")
    dsub = p.add_subparsers(dest="action", required=True)
    d = dsub.add_parser("seed", help="bulk-load customers, products, orders and lines")
    d.add_argument("--rows", type=int, default=1000, help="customers to add (others scale)")
    d = dsub.add_parser("load", help="run a realistic change workload")
    d.add_argument("--rate", type=float, default=50.0, help="transactions per second")
    d.add_argument("--seconds", type=float, default=30.0, help="how long")
    p.set_defaults(handler=_demo)

    p = sub.add_parser("topics", help="show the change topics: counts and sample events")
    p.add_argument("--prefix", default="shop.", help="topic name prefix (default shop.)")
    p.add_argument("--sample", type=int, default=3, help="events to show per topic")
    p.add_argument("--wait", action="store_true", help="first wait until Connect has caught up")
    p.set_defaults(handler=_topics)

    p = sub.add_parser("run", help="snapshot the tables, then apply their changelog to Delta")
    p.add_argument("--once", action="store_true", help="process what is available, then exit")
    p.add_argument("--tables", help="only these tables, comma-separated (default: all captured)")
    p.add_argument(
        "--master", help="Spark master URL (default local[2], or CHANGELAKE_SPARK_MASTER)"
    )
    p.add_argument("--resnapshot", help="drop these derived tables and snapshot them again")
    p.add_argument(
        "--trigger-seconds",
        type=float,
        default=DEFAULTS.trigger_seconds,
        help="micro-batch interval",
    )
    p.add_argument(
        "--compact-seconds",
        type=float,
        default=DEFAULTS.compact_seconds,
        help="compaction interval",
    )
    p.add_argument(
        "--max-records",
        type=int,
        default=DEFAULTS.max_records_per_batch,
        help="most records per table per batch",
    )
    p.set_defaults(handler=_run)

    p = sub.add_parser("query", help="run Spark SQL over the derived tables (and _errors)")
    p.add_argument("sql", help='e.g. "SELECT country, count(*) FROM customers GROUP BY 1"')
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="a JSON array of objects")
    fmt.add_argument("--csv", action="store_true", help="CSV with a header line")
    p.set_defaults(handler=_query)

    p = sub.add_parser("search", help="full-text search over the indexed tables")
    p.add_argument("text", help='words to find, e.g. "steel chair" ("" matches everything)')
    p.add_argument("--table", help="only these indexed tables, comma-separated")
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="narrow the results (repeatable); numeric and date fields also take <, <=, >, >=",
    )
    p.add_argument("--limit", type=int, default=10, help="how many results (default 10)")
    p.add_argument("--json", action="store_true", help="results as JSON, for programs")
    p.set_defaults(handler=_search)

    p = sub.add_parser("reindex", help="rebuild a table's index from Delta, then swap its alias")
    p.add_argument("table", help="an indexed table (see schemas/search.json)")
    p.set_defaults(handler=_reindex)

    p = sub.add_parser("verify", help="prove the Delta tables and indexes equal the source")
    p.add_argument("tables", nargs="*", help="tables to check (default: all captured)")
    p.add_argument("--json", action="store_true", help="the report as JSON, for programs")
    p.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for the pipeline to catch up"
    )
    p.add_argument(
        "--range-rows", type=int, default=50_000, help="source rows compared per key range"
    )
    p.add_argument(
        "--repair",
        action="store_true",
        help="ask Debezium to re-send the rows found missing or different (an incremental "
        "snapshot of just those keys), then verify again",
    )
    p.add_argument(
        "--passes", type=int, default=3, help="with --repair: most re-send rounds (default 3)"
    )
    p.set_defaults(handler=_verify)

    p = sub.add_parser("chaos", help="inject faults under load; verify after every round")
    p.add_argument("--rounds", type=int, default=6, help="rounds of one fault of each kind")
    p.add_argument("--rate", type=float, default=30.0, help="workload transactions per second")
    p.add_argument("--seed", type=int, default=1, help="chooses fault order and timing")
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    p.set_defaults(handler=_chaos)

    p = sub.add_parser("bench", help="measure snapshot, throughput, freshness, stage limits")
    quiet = argparse.SUPPRESS
    p.add_argument("--rows", type=int, default=quiet, help="customers; the other tables scale")
    p.add_argument("--rate", type=float, default=quiet, help="first step's transactions/s")
    p.add_argument("--steps", type=int, default=quiet, help="load steps, each doubling the rate")
    for flag, dest, text in (
        ("--step-seconds", "step_s", "length of each step"),
        ("--prefill-seconds", "prefill_s", "load for stage limits"),
    ):
        p.add_argument(flag, dest=dest, metavar="SECONDS", type=float, default=quiet, help=text)
    p.set_defaults(handler=_bench)

    p = sub.add_parser("status", help="each derived table: rows, applied LSN, lag, errors")
    p.add_argument("--json", action="store_true", help="for programs")
    p.set_defaults(handler=_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
        handler: Handler = args.handler
        return handler(args, settings)
    except ChangelakeError as exc:
        print(f"changelake: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("changelake: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
