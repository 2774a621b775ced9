"""What each `changelake` subcommand does: call into the pipeline's stages and print. The
parser (cli.py) names one of these per subcommand; nothing here parses."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changelake import exit_codes
from changelake.apply.run_options import RunOptions
from changelake.exceptions import ConfigError
from changelake.settings import Settings

if TYPE_CHECKING:  # the benchmark's modules load only for `changelake bench`
    from changelake.bench.options import BenchOptions
    from changelake.tables import TableRef

Handler = Callable[[argparse.Namespace, Settings], int]


def setup_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake.stack.install import setup

    setup(settings)
    return 0


def stack_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake.stack import manager

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
        healthy = all(s["state"] == "healthy" for s in report["services"].values())
        return exit_codes.OK if healthy else exit_codes.NEEDS_A_PERSON
    return exit_codes.OK


def _print_stack_status(report: dict[str, Any]) -> None:
    from changelake.stack.manager import describe_endpoint

    print(f"state directory: {report['home']}")
    for name, svc in report["services"].items():
        where = describe_endpoint(svc)
        pid = svc["pid"] or "-"
        print(f"  {name:<11} {svc['state']:<22} pid {pid!s:<8} {where}")


def connectors_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake.capture import connector_status, connectors, removal

    if args.action == "apply":
        files = [Path(f) for f in args.files] or connectors.default_files(settings)
        say = _progress(args)
        changes = connectors.apply(settings, files, timeout_s=args.timeout, progress=say)
        if args.json:
            states = connector_status.status(settings)
            doc = [{"connector": n, "change": c, **states.get(n, {})} for n, c in changes.items()]
            print(json.dumps(doc, indent=2))
    elif args.action == "init":
        _init_connector(args, settings)
    elif args.action == "delete":
        if args.drop_slot:
            _confirmed(args, f"drop the replication slot of connector {args.name}")
        removal.delete(settings, args.name, drop_slot=args.drop_slot)
    elif args.action == "rebuild":
        from changelake.apply import rebuild

        return rebuild.rebuild_lake(settings, args.name, lambda asked: _confirmed(args, asked))
    else:
        report = connector_status.status(settings)
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            connector_status.print_status(report)
        return connector_status.exit_code(report)
    return 0


def _init_connector(args: argparse.Namespace, settings: Settings) -> None:
    from changelake.capture import prepare
    from changelake.secrets import read_secret

    keys = {}
    for given in args.key:
        table, sep, columns = given.partition(":")
        if not sep or not columns.strip():
            raise ConfigError(f"--key: {given!r} is not schema.table:col,…")
        keys[table.strip()] = [c.strip() for c in columns.split(",") if c.strip()]
    request = prepare.Request(
        name=args.name,
        admin_dsn=args.admin_dsn,
        tables=[t.strip() for t in args.tables.split(",") if t.strip()],
        keys=keys,
        role=args.role,
        password=read_secret(settings, "debezium_password") or "",
    )
    output = Path(args.output) if args.output else settings.connectors_dir / f"{args.name}.json"
    print(f"preparing {request.name}: role {request.role}, publication {request.publication}")
    prepare.init(settings, request, output)


def demo_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake.demo import load, seed
    from changelake.stack.postgres import Postgres

    dsn = Postgres(settings).admin_dsn()
    if args.action == "seed":
        report = seed.seed(dsn, args.rows)
        print(report.summary())
    else:
        result = load.run_load(dsn, args.rate, args.seconds)
        print(result.summary())
    return 0


def topics_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake.capture import topics

    topics.show(settings, prefix=args.prefix, sample=args.sample, wait=args.wait, as_json=args.json)
    return 0


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _progress(args: argparse.Namespace) -> Callable[[str], None]:
    """Where a command's progress lines go: stdout, or stderr when stdout is its JSON."""
    if getattr(args, "json", False):
        return lambda text: print(text, file=sys.stderr)
    return print


def _confirmed(args: argparse.Namespace, what: str) -> None:
    """Destroying needs `--yes`, or a person answering yes at a terminal."""
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise ConfigError(
            f"--yes: not given, and no terminal to ask whether to {what}",
            "nothing was changed; add --yes to go ahead",
        )
    if input(f"{what[0].upper()}{what[1:]}? Type yes to go ahead: ").strip().lower() != "yes":
        raise ConfigError(f"not confirmed: did not {what}", "nothing was changed")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake import tables
    from changelake.apply import run_command

    if args.master:
        settings = dataclasses.replace(settings, spark_master=args.master)
    refs = tables.captured(settings, _names(args.tables) or None)
    options = RunOptions(
        once=args.once,
        resnapshot=tuple(_names(args.resnapshot)),
        trigger_seconds=args.trigger_seconds,
        views_seconds=args.views_seconds,
        verify_share=args.verify_share,
        max_records_per_batch=args.max_records,
        ui=args.ui,
        metrics_port=args.metrics_port,
    )
    tables.captured(settings, list(options.resnapshot) or None)  # names must exist
    if options.resnapshot:
        _confirmed(args, f"drop the derived tables {', '.join(options.resnapshot)}")

    def discover() -> list[tables.TableRef]:  # tables added to the connector files later
        return tables.captured(settings, _names(args.tables) or None)

    return run_command.run(settings, refs, options, discover=discover)


def query_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake.read import export, query
    from changelake.read.formats import format_table

    chosen = "json" if args.json else "csv" if args.csv else "parquet" if args.parquet else None
    output = Path(args.output) if args.output else None
    as_of = None
    if args.as_of_lsn or args.consistent:  # as_of's import pulls in the Delta writers
        from changelake.read.as_of import AsOf, parse_lsn

        as_of = AsOf(parse_lsn(args.as_of_lsn)) if args.as_of_lsn else AsOf()
    if chosen or output:  # streamed, any size
        say = (lambda line: print(line, file=sys.stderr)) if output is None else print
        fmt = export.format_of(chosen, output)
        export.export(settings, args.sql, fmt, output, say, as_of)
        return 0
    columns, rows = query.run_query(
        settings, args.sql, as_of=as_of, say=lambda line: print(line, file=sys.stderr)
    )
    print(format_table(columns, rows))
    return 0


def status_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake.read import status, status_print

    if args.pipeline:
        code, line = status.pipeline_health(settings)
        print(line)
        return code
    report = status.collect(settings)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        status_print.print_report(report)
    return status.exit_code(report)


def search_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake import tables
    from changelake.search import find
    from changelake.search.client import SearchClient
    from changelake.search.config import alias_for

    only = _names(args.tables) or None
    indexed = [r for r in tables.captured(settings, only) if r.search is not None]
    if not indexed:
        raise ConfigError(
            f"no indexed table{' named ' + args.tables if args.tables else ''}",
            "declare it under indexes in schemas/search.json",
        )
    aliases = {alias_for(r.topic): r.search for r in indexed if r.search is not None}
    tty = sys.stdout.isatty()
    tags = find.JSON_TAGS if args.json else (("\x1b[1;33m", "\x1b[0m") if tty else ("**", "**"))
    client = SearchClient.of(settings, retry_for_s=0)
    total, hits = find.search(client, aliases, args.text, args.filter, args.limit, tags)
    if args.json:
        print(find.format_json(total, hits))
    else:
        specs = {spec.table: spec for spec in aliases.values()}
        print(find.format_text(args.text, total, hits, specs))
    return 0


def reindex_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake import tables
    from changelake.search.client import SearchClient
    from changelake.search.reindex import reindex
    from changelake.sinks.search import SearchSink
    from changelake.spark import owned_session

    refs = tables.captured(settings, _names(args.tables))
    for ref in refs:
        if ref.search is None:
            raise ConfigError(
                f"--tables: {ref.name} is not indexed",
                "declare it under indexes in schemas/search.json",
            )
    say = _progress(args)
    client = SearchClient.of(settings, say=say)
    client.request("GET", "/")  # name OpenSearch now, before Spark starts, if it is down
    built = []
    with owned_session(settings, app="changelake-reindex") as spark:
        for ref in refs:
            assert ref.search is not None
            sink = SearchSink(client, ref.search, ref.topic, say)
            done = reindex(spark, ref, settings.lake, sink, say)
            say(
                f"{ref.name}: {done.docs:,} documents in {done.index} ({done.seconds:.1f}s, "
                f"{done.docs / max(done.seconds, 1e-9):,.0f} docs/s); {done.caught_up:,} changes "
                f"made meanwhile replayed; alias {sink.alias} now points at it"
            )
            built.append({"table": ref.name, "alias": sink.alias, **dataclasses.asdict(done)})
    if args.json:
        print(json.dumps(built, indent=2))
    return 0


def _reachable(settings: Settings, refs: list[TableRef]) -> None:
    from changelake import kafka_io, pg
    from changelake.tables import slot_sources

    for source in slot_sources(settings, refs).values():
        pg.connect(source.dsn()).close()
    kafka_io.list_topics(settings.kafka_bootstrap)


def verify_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake import tables
    from changelake.spark import owned_session
    from changelake.verify.command import print_report
    from changelake.verify.repair import verify_repairing

    refs = tables.captured(settings, _names(args.tables) or None)
    say = (lambda text: print(text, file=sys.stderr)) if args.json else print
    _reachable(settings, refs)  # before the Spark session: a service down is named in a second
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
    return exit_codes.OK if equal else exit_codes.NEEDS_A_PERSON


def maintain_command(args: argparse.Namespace, settings: Settings) -> int:
    from changelake import tables
    from changelake.sinks.maintenance import maintain
    from changelake.spark import owned_session

    refs = tables.captured(settings, _names(args.tables) or None)
    with owned_session(settings, app="changelake-maintain") as spark:
        done = maintain(spark, refs, settings.lake, args.retain_hours, _progress(args))
    if args.json:
        print(json.dumps([dataclasses.asdict(d) for d in done], indent=2))
    return 0


def _from_a_checkout(part: str) -> None:
    """`bench` and `chaos` are left out of the pipeline image (.dockerignore): say so, by name."""
    import importlib.util

    if importlib.util.find_spec(f"changelake.{part}") is None:
        raise ConfigError(
            f"changelake {part} is not in this installation (the pipeline image leaves it out)",
            f"run it from a clone of the repository: make setup, then make {part}",
        )


def chaos_command(args: argparse.Namespace, settings: Settings) -> int:
    import os
    from datetime import UTC, datetime

    _from_a_checkout("chaos")

    from changelake import tables
    from changelake.chaos.event_setup import event_table
    from changelake.chaos.faults import KINDS
    from changelake.chaos.runner import Chaos, ChaosOptions
    from changelake.chaos.workload import BackgroundLoad
    from changelake.stack.postgres import Postgres

    out_dir = settings.home / "chaos" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    shop = [r for r in tables.captured(settings) if r.table == "orders"]  # the load's tables
    print(f"chaos: {args.rounds} rounds of {len(KINDS)} faults under load; logs in {out_dir}")
    dsn = Postgres(settings).admin_dsn()

    def workload(seed: int) -> BackgroundLoad:
        return BackgroundLoad(dsn, args.rate, seed, print)

    with event_table(settings, dsn, out_dir / "connectors") as events:
        options = ChaosOptions(
            rounds=args.rounds,
            rate=args.rate,
            seed=args.seed,
            connector=shop[0].connector if shop else None,
            events=events,
        )
        env = {**os.environ, "CHANGELAKE_CONNECTORS_DIR": str(out_dir / "connectors")}
        summary = Chaos(settings, env, workload, out_dir, print).run(options)
    print(json.dumps(summary.as_dict(), indent=2) if args.json else summary.text())
    return exit_codes.NEEDS_A_PERSON if summary.differences else exit_codes.OK


def bench_options(args: argparse.Namespace) -> BenchOptions:
    """The flags given; the others keep BenchOptions' defaults, declared there only."""
    from changelake.bench.options import BenchOptions

    names = [f.name for f in dataclasses.fields(BenchOptions)]  # the flags' `dest`s
    return BenchOptions(**{name: getattr(args, name) for name in names if hasattr(args, name)})


def bench_command(args: argparse.Namespace, settings: Settings) -> int:
    _from_a_checkout("bench")
    from changelake.bench.entry import bench

    return bench(settings, bench_options(args), args.beside, args.report)
