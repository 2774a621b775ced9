"""The `changelake` command: parse, then call the subcommand (commands.py). No logic of its own."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from changelake import __version__, commands, exit_codes
from changelake.apply.run_options import DEFAULTS
from changelake.commands import Handler
from changelake.exceptions import ChangelakeError
from changelake.settings import dotenv_defaults, load_settings, project_root

NO_DEFAULT: tuple[object, ...] = (
    None,
    False,
    [],
    argparse.SUPPRESS,
)  # defaults an option's help does not show


class _DefaultsShown(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it names one itself (or has none: a
    flag, an unset option)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        quiet = action.default in NO_DEFAULT or not action.option_strings
        if quiet or "(default" in text:
            return action.help
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """changelake's parsers: subcommands' too (argparse makes those of the same class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _DefaultsShown)
        super().__init__(*args, **kwargs)


def _share(text: str) -> float:
    """A share of a core's time: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share from 0 to 1 (such as 0.1)")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="changelake",
        description="Postgres → Debezium → Kafka → Delta Lake and OpenSearch, kept in step.",
    )
    parser.add_argument("--version", action="version", version=f"changelake {__version__}")
    parser.add_argument(
        "--project",
        metavar="DIR",
        help="the project holding connectors/ and schemas/ (lake.json, search.json); "
        "default: CHANGELAKE_PROJECT, else the checkout's demo shop",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("setup", help="install the local stack's services once (make setup)")
    p.set_defaults(handler=commands.setup_command)

    p = sub.add_parser("stack", help="run the local services: up | down | status")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("services", nargs="*", help="postgres, kafka, connect, opensearch (default all)")
    p.add_argument("--json", action="store_true", help="status as JSON, for programs")
    p.set_defaults(handler=commands.stack_command)

    p = sub.add_parser(
        "connectors", help="init | apply | status | delete | rebuild Kafka Connect connectors"
    )
    csub = p.add_subparsers(dest="action", required=True)
    c = csub.add_parser("apply", help="validate, then create or update connectors from JSON")
    c.add_argument("files", nargs="*", help="connector JSON files (default: connectors/*.json)")
    c.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for RUNNING")
    c.add_argument(
        "--json",
        action="store_true",
        help="each connector's change and state as JSON, for programs",
    )
    c = csub.add_parser(
        "init",
        help="prepare a database for capture (role, grants, publication, heartbeat and signal "
        "tables) and write its connector file",
    )
    c.add_argument("name", help="the connector's name; its slot, publication, topic prefix")
    c.add_argument(
        "--admin-dsn",
        required=True,
        help="a superuser's connection string for the database, used once and never stored "
        "(keep the password out of it: PGPASSWORD or ~/.pgpass)",
    )
    c.add_argument("--tables", required=True, help="schema.table,… to capture")
    c.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="TABLE:COLS",
        help="key columns of a table without a primary key (repeatable)",
    )
    c.add_argument("--role", default="debezium", help="the connector's login role")
    c.add_argument("--output", help="where to write the file (default: connectors/NAME.json)")
    c = csub.add_parser("status", help="each connector's and task's state")
    c.add_argument("--json", action="store_true")
    c = csub.add_parser("delete", help="remove a connector and the offsets Connect stored for it")
    c.add_argument("name")
    c.add_argument(
        "--drop-slot",
        action="store_true",
        help="also drop its replication slot: the WAL it kept is gone, and a new connector "
        "snapshots again (asks first, unless --yes)",
    )
    c.add_argument("--yes", action="store_true", help="destroy without asking")
    c = csub.add_parser(
        "rebuild",
        help="capture a restored or replaced source from nothing and make its tables again "
        "(its slot, offsets and topics deleted; `changelake run` stopped first)",
    )
    c.add_argument("name")
    c.add_argument("--yes", action="store_true", help="destroy without asking")
    p.set_defaults(handler=commands.connectors_command)

    p = sub.add_parser("demo", help="the demo shop: seed rows, run a workload")
    dsub = p.add_subparsers(dest="action", required=True)
    d = dsub.add_parser("seed", help="bulk-load customers, products, orders and lines")
    d.add_argument("--rows", type=int, default=1000, help="customers to add (others scale)")
    d = dsub.add_parser("load", help="run a realistic change workload")
    d.add_argument("--rate", type=float, default=50.0, help="transactions per second")
    d.add_argument("--seconds", type=float, default=30.0, help="how long")
    p.set_defaults(handler=commands.demo_command)

    p = sub.add_parser("topics", help="show the change topics: counts and sample events")
    p.add_argument(
        "--prefix", help="topic name prefix (default: the project's connector files' topic.prefix)"
    )
    p.add_argument("--json", action="store_true", help="for programs")
    p.add_argument("--sample", type=int, default=3, help="events to show per topic")
    p.add_argument("--wait", action="store_true", help="first wait until Connect has caught up")
    p.set_defaults(handler=commands.topics_command)

    p = sub.add_parser("run", help="snapshot the tables, then apply their changes to Delta")
    p.add_argument("--once", action="store_true", help="process what is available, then exit")
    p.add_argument("--tables", help="only these tables, comma-separated (default: all captured)")
    p.add_argument(
        "--master", help="Spark master URL (default local[2], or CHANGELAKE_SPARK_MASTER)"
    )
    p.add_argument(
        "--resnapshot",
        help="drop these derived tables (comma-separated) and snapshot them again (asks first, "
        "unless --yes)",
    )
    p.add_argument("--yes", action="store_true", help="destroy without asking")
    p.add_argument(
        "--trigger-seconds",
        type=float,
        default=DEFAULTS.trigger_seconds,
        help="micro-batch interval",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        help="serve Prometheus metrics on this port, 0 for none (default: "
        "CHANGELAKE_METRICS_PORT, else 9464; a streaming run only)",
    )
    p.add_argument(
        "--verify-share",
        type=_share,
        metavar="SHARE",
        default=DEFAULTS.verify_share,
        help="share of one core a streaming run spends comparing the lake with its source, key "
        "range by key range, and has what differs sent again (0: never)",
    )
    p.add_argument(
        "--views-seconds",
        type=float,
        default=DEFAULTS.views_seconds,
        help="how often aggregate views (views.json) are brought up to date",
    )
    p.add_argument(
        "--max-records",
        type=int,
        default=DEFAULTS.max_records_per_batch,
        help="most records a batch reads, per table of its connector",
    )
    p.add_argument(
        "--ui",
        action="store_true",
        help="Spark's web UI (jobs, stages, streaming queries) on port 4040 or the next free "
        "one, on 127.0.0.1 with the local master; its address is printed",
    )
    p.set_defaults(handler=commands.run_command)

    p = sub.add_parser("query", help="run Spark SQL over the derived tables (and _errors)")
    p.add_argument("sql", help='e.g. "SELECT country, count(*) FROM customers GROUP BY 1"')
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="a JSON array of objects (streamed)")
    fmt.add_argument("--csv", action="store_true", help="CSV with a header line (streamed)")
    fmt.add_argument("--parquet", action="store_true", help="one Parquet file (needs --output)")
    p.add_argument(
        "--output",
        metavar="FILE",
        help="write the whole result there (format from --csv/--json/--parquet or the suffix); "
        "without it, a table is printed (up to 10,000 rows) or CSV/JSON go to stdout",
    )
    point = p.add_mutually_exclusive_group()
    point.add_argument(
        "--as-of-lsn",
        metavar="LSN",
        help="every table and view as of the source transactions committed at or before LSN "
        "(0/16B3748 or a number), read from the tables' histories",
    )
    point.add_argument(
        "--consistent",
        action="store_true",
        help="every table and view as of the newest source transaction all tables have stored "
        "whole: never half of a multi-table transaction",
    )
    p.set_defaults(handler=commands.query_command)

    p = sub.add_parser("search", help="full-text search over the indexed tables")
    p.add_argument("text", help='words to find, e.g. "steel chair" ("" matches everything)')
    p.add_argument("--tables", help="only these indexed tables, comma-separated (default: all)")
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="narrow the results (repeatable); numeric and date fields also take <, <=, >, >=",
    )
    p.add_argument("--limit", type=int, default=10, help="how many results")
    p.add_argument("--json", action="store_true", help="results as JSON, for programs")
    p.set_defaults(handler=commands.search_command)

    p = sub.add_parser(
        "reindex", help="rebuild tables' indexes from Delta, then swap their aliases"
    )
    p.add_argument(
        "--tables", required=True, help="indexed tables, comma-separated (see schemas/search.json)"
    )
    p.add_argument("--json", action="store_true", help="each new index as JSON, for programs")
    p.set_defaults(handler=commands.reindex_command)

    p = sub.add_parser("verify", help="prove the Delta tables and indexes equal the source")
    p.add_argument("--tables", help="only these tables, comma-separated (default: all captured)")
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
    p.add_argument("--passes", type=int, default=3, help="with --repair: most re-send rounds")
    p.set_defaults(handler=commands.verify_command)

    p = sub.add_parser(
        "maintain",
        help="OPTIMIZE the derived tables (pack the small files batches leave) and VACUUM "
        "the files no version needs; safe beside a running pipeline",
    )
    p.add_argument("--tables", help="only these tables, comma-separated (default: all captured)")
    p.add_argument(
        "--retain-hours",
        type=float,
        default=168.0,  # Delta's own default deleted-file retention: a week
        help="VACUUM keeps files younger than this; never below the table's deleted-file "
        "retention, a week by default",
    )
    p.add_argument("--json", action="store_true", help="each table's files as JSON, for programs")
    p.set_defaults(handler=commands.maintain_command)

    p = sub.add_parser("chaos", help="inject faults under load; verify after every round")
    p.add_argument("--rounds", type=int, default=6, help="rounds of one fault of each kind")
    p.add_argument("--rate", type=float, default=30.0, help="workload transactions per second")
    p.add_argument("--seed", type=int, default=1, help="chooses fault order and timing")
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    p.set_defaults(handler=commands.chaos_command)

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
    p.add_argument(
        "--beside", metavar="RESULTS_JSON", type=Path, help="an earlier run's figures beside"
    )
    p.add_argument(
        "--report", metavar="DIR", type=Path, help="no run: write DIR's report from its results"
    )
    p.set_defaults(handler=commands.bench_command)

    p = sub.add_parser("status", help="each derived table: rows, applied LSN, lag, errors")
    p.add_argument("--json", action="store_true", help="for programs")
    p.add_argument(
        "--pipeline",
        action="store_true",
        help="only whether `run` runs with no table stopped or failed, from its state file "
        "(no Spark, no services: a container healthcheck)",
    )
    p.set_defaults(handler=commands.status_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.project:  # for this command and every process it starts
            os.environ["CHANGELAKE_PROJECT"] = str(Path(args.project).resolve())
        project = os.environ.get("CHANGELAKE_PROJECT")
        os.environ.update(dotenv_defaults(Path(project) if project else project_root()))
        settings = load_settings()
        handler: Handler = args.handler
        return handler(args, settings)
    except ChangelakeError as exc:
        print(f"changelake: {exc}", file=sys.stderr)
        return exit_codes.ERROR
    except KeyboardInterrupt:
        print("changelake: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
