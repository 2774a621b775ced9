"""`changelake bench` / `make bench`: seed, snapshot, stage limits, baseline, sustained load with
a step-up, then the report (JSON, markdown, PNG) under `.changelake/bench/<time>/`."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from changelake.bench import (
    baseline_stream,
    pipeline_runs,
    query_latency,
    quiet_tail,
    resources,
    resync_phase,
    source,
    stages,
    verify_cost,
    views_phase,
)
from changelake.bench.baseline_stream import BaselineStream
from changelake.bench.connector_pair import ConnectorPair
from changelake.bench.options import BenchOptions
from changelake.bench.pgbench_load import PgbenchRun, run_pgbench
from changelake.bench.report import machine_info, stage_figures, sustained_figures, write_report
from changelake.bench.rounds import round_figures
from changelake.bench.stats import per_1000, summarize
from changelake.bench.step_cpu import CpuPerStep
from changelake.bench.sustained import (
    IndexWatch,
    Load,
    Step,
    judged_by_freshness,
    run_steps,
    table_lags,
    timeline,
)
from changelake.bench.visibility import ends_of, freshness_figures, table_shape
from changelake.bench.waits import wait_saying
from changelake.chaos.pipeline_process import PipelineProcess
from changelake.search.client import SearchClient
from changelake.settings import Settings

Say = Callable[[str], None]
DECODING_SLOT = "changelake_bench_decoding"


class Bench:
    def __init__(self, settings: Settings, options: BenchOptions, out_dir: Path, say: Say):
        self.settings, self.options, self.out_dir, self.say = settings, options, out_dir, say
        self.lake, shop = out_dir / "lake", settings.config_dir
        self.env = {
            **os.environ,
            "CHANGELAKE_LAKE": str(self.lake),
            "CHANGELAKE_CHECKPOINTS": str(out_dir / "checkpoints"),
            "CHANGELAKE_CONNECTORS_DIR": str(out_dir / "connectors"),
            "CHANGELAKE_SEARCH_CONFIG": self._config("search.json", shop / "search.json"),
            # The base pipeline alone, as the baseline (which keeps no views) and as the reports
            # before views were measured: no views, no histories (views_phase adds the views).
            "CHANGELAKE_VIEWS_CONFIG": self._config("views.json", '{"views": {}}\n'),
            "CHANGELAKE_LAKE_CONFIG": self._config("lake.json", _no_history(shop / "lake.json")),
        }
        self.log = out_dir / "bench.log"
        self.connector = source.connector_name(out_dir.name)
        self.figures: dict[str, Any] = {"records": {}}
        self.cpu = CpuPerStep(lambda: resources.service_pids(settings))  # in the step-ups
        self.pair = ConnectorPair(settings, out_dir, self.figures["records"], say)

    def _config(self, name: str, text: str | Path) -> str:
        """A config file of the bench's own (`text`, or a copy of that file), by path."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / name).write_text(text.read_text() if isinstance(text, Path) else text)
        return str(self.out_dir / name)

    def table(self, name: str) -> Path:
        return self.lake / source.PREFIX / "public" / name

    # --- phases ---------------------------------------------------------------------------------
    def run(self, earlier: Mapping[str, Any] | None = None) -> Path:
        """Every phase, then the report (with `earlier`'s figures beside, when given)."""
        began, started_at, o = time.monotonic(), datetime.now(UTC).isoformat(), self.options
        sampler = resources.ResourceSampler(resources.service_pids(self.settings))
        sampler.start()
        try:
            dsn = self._seed()
            self._snapshot()
            self._stage_limits(dsn)
            steps, moments = self._sustained(dsn, sampler)
            self.say("bench: continuous verification on and off under the same load")
            self.figures["verify_cost"] = verify_cost.measure(self._cost_run(dsn), o.rate)
            self.figures["views"] = views_phase.measure(self._views_run(dsn), self.options.rate)
            self.figures["resync"] = resync_phase.measure(self._resync_run(dsn), o.rate)
            self._baseline_sustained(dsn)
        finally:  # a connector left running would hold its slot, and its WAL, for nothing
            source.remove_connectors(self.settings, self.say)
        results = self._results(steps, moments, sampler.stop(), started_at, began)
        md = write_report(results, self.out_dir, earlier)[1]
        self.say(f"bench: report in {md}")
        return md

    def _seed(self) -> str:
        self.say(
            f"bench: a fresh database `{source.DATABASE}` with {self.options.rows:,} customers"
        )
        dsn = source.reset(self.settings, self.say)
        rows = source.seed_in_chunks(dsn, self.options.rows, self.say)
        self.figures["rows"] = rows
        # One connector at a time, so each has the machine to itself: the baseline's first.
        self.pair.snapshot("stock", rows, self._wait)
        self.figures["debezium_rows_per_s"] = self.pair.snapshot("lean", rows, self._wait)
        return dsn

    def _snapshot(self) -> None:
        self.say("bench: snapshot into Delta (`changelake run --once`)")
        ours = pipeline_runs.run_once(self.env, self.log)
        self.figures["snapshot"] = {
            "rows": ours.snapshot_rows,
            "seconds": ours.snapshot_s,
            "rows_per_s": ours.snapshot_rows / ours.snapshot_s if ours.snapshot_s else 0.0,
            "debezium_rows_per_s": self.figures["debezium_rows_per_s"],
        }
        self.say(f"  {ours.snapshot_rows:,} rows in {ours.snapshot_s:.0f} s")
        self.say("bench: the baseline's initial load of the same topics")
        seconds, _ = pipeline_runs.baseline(self.env, self._baseline_jobs(), self.log)
        self.figures["baseline_snapshot_per_s"] = self.figures["rows"] / seconds
        self.say(f"  {self.figures['rows']:,} rows in {seconds:.0f} s")

    def _baseline_jobs(self, checkpoints: str = "baseline-checkpoints") -> list[dict[str, object]]:
        shapes = {name: table_shape(self.table(name)) for name in source.TABLES}
        return [
            {
                "topic": f"{source.STOCK_PREFIX}.public.{name}",  # the stock converter's
                "key": key,
                "path": str(self.out_dir / "baseline" / name),
                "checkpoint": str(self.out_dir / checkpoints / name),
                "schema": schema,
            }
            for name, (key, schema) in shapes.items()
        ]

    def _stage_limits(self, dsn: str) -> None:
        """A load written while Debezium is paused and no pipeline runs; then each stage alone
        on it: decoding, Debezium, our apply, the baseline's apply."""
        o, s = self.options, self.settings
        self.say(f"bench: stage limits on {o.prefill_s:.0f} s of load at {o.prefill_rate:g}/s")
        stages.create_decoding_slot(dsn, DECODING_SLOT)
        for name in self.pair.names.values():
            stages.paused(s.connect_url, name, pause=True)
        load = self._load(dsn)(o.prefill_rate, o.prefill_s, 11)
        decoding = stages.decode(dsn, DECODING_SLOT, source.PUBLICATION)
        self.say(
            f"  decoding: {decoding.changes:,} row changes in {decoding.seconds:.2f} s (the load"
            f" wrote {load.row_changes:,} in {load.transactions:,} transactions)"
        )
        self.pair.alone("stock", dsn, decoding.changes)
        debezium = self.pair.alone("lean", dsn, decoding.changes)
        ours = pipeline_runs.run_once(self.env, self.log)
        self.say(
            f"  changelake apply: {ours.changes:,} changes in the base tables in"
            f" {ours.queryable_s:.1f} s (the run ended at {ours.working_s:.1f} s),"
            f" {ours.cpu_s:.0f} CPU s"
        )
        base_s, base_cpu_s = pipeline_runs.baseline(self.env, self._baseline_jobs(), self.log)
        self.say(f"  baseline apply: the same in {base_s:.1f} s, {base_cpu_s:.0f} CPU s")
        self.figures["apply_cpu_per_1000"] = per_1000(ours.cpu_s, ours.changes)
        self.figures["baseline_apply_cpu_per_1000"] = per_1000(base_cpu_s, ours.changes)
        self.figures["stages"] = stage_figures(
            decoding.per_s,
            debezium.per_s,
            ours.changes / ours.queryable_s if ours.queryable_s else None,
        )
        self.figures["baseline_apply_per_s"] = ours.changes / base_s if base_s else None
        self.pair.measure_sizes()
        # The baseline's connector is done: it would only compete with the sustained load.
        source.remove_connectors(s, self.say, only=self.pair.names["stock"])

    def _sustained(
        self, dsn: str, sampler: resources.ResourceSampler
    ) -> tuple[list[Step], dict[str, Any]]:
        o = self.options
        pipeline = PipelineProcess(self.env, self._pipeline_log(), ("--trigger-seconds", "1"))
        ends = {t: ends_of(self.settings.kafka_bootstrap, t) for t in source.topics()}
        pipeline.start()
        sampler.add("changelake run", pipeline.pid)
        watch = IndexWatch(
            SearchClient.of(self.settings, retry_for_s=0),
            [f"{source.PREFIX}.public.products", f"{source.PREFIX}.public.customers"],
        )
        watch.start()
        try:
            self._wait(
                lambda: pipeline.alive() and self._streaming(), "the pipeline to stream", 600
            )
            steps = run_steps(
                self.cpu.load(self._load(dsn), "changelake", lambda: pipeline.pid),
                table_lags([self.table(t) for t in source.TABLES]),
                o.rates,
                o.step_s,
                o.settle_s,
                o.max_lag_s,
                self.say,
                self._applied_everything,
            )
            # Bounded: after a step the pipeline could not sustain, the backlog may take long.
            self._wait(self._applied_everything, "the pipeline to catch up", 180, required=False)
            queries = query_latency.served(self.env, source.TABLES[0])
            self.say(f"bench: query through the running pipeline p50 {queries['served_p50']:.2f} s")
            self.figures["quiet"] = quiet_tail.measure(
                self.env,
                self.settings.kafka_bootstrap,
                self._tables(),
                source.TABLES[0],
                lambda seconds: self._load(dsn)(o.rate, seconds, 23),
                self.say,
            )
        finally:
            moments = watch.stop()
            pipeline.stop()
        queries["local_s"] = query_latency.timed_query(self.env, queries["sql"])[0]
        self.figures["query"] = queries
        return steps, {"ends": ends, "index": moments}

    def _baseline_sustained(self, dsn: str) -> None:
        """The same step-up against the textbook job streaming on its own connector, with
        changelake's connector paused: each has the machine to itself."""
        o = self.options
        self.say("bench: the baseline under the same step-up")
        stages.paused(self.settings.connect_url, self.pair.names["lean"], pause=True)
        self.pair.stock_from_now()
        stream = BaselineStream(self.env, self._baseline_jobs("baseline-stream"), self.log)
        steps, seen = baseline_stream.sustained(
            self.settings.kafka_bootstrap,
            stream,
            self.cpu.load(self._load(dsn), "baseline", stream.pid),
            o.rates,
            o.step_s,
            o.settle_s,
            o.max_lag_s,
            self.say,
        )
        self.figures["baseline_sustained"] = sustained_figures(steps)
        self.figures["baseline_freshness"] = summarize(seen).as_dict() if seen else None

    def _cost_run(self, dsn: str) -> verify_cost.CostRun:
        load = self._load(dsn)
        return verify_cost.CostRun(
            self.env,
            self.out_dir,
            lambda rate, seconds: load(rate, seconds, 29),
            table_lags([self.table(t) for t in source.TABLES]),
            self._streaming,
            self._applied_everything,
            len(source.TABLES),
            self._wait,
            self.say,
        )

    def _views_run(self, dsn: str) -> views_phase.ViewsRun:
        load = self._load(dsn)
        return views_phase.ViewsRun(
            self.settings.kafka_bootstrap,
            self.env,
            self.lake,
            {t: self.table(n) for n, t in zip(source.TABLES, source.topics(), strict=True)},
            dict(zip(source.topics(), source.TABLES, strict=True)),
            self.out_dir / "views-pipeline.log",
            self.settings.config_dir / "views.json",
            lambda rate: load(rate, self.options.step_s, 17),
            lambda: {t: ends_of(self.settings.kafka_bootstrap, t) for t in source.topics()},
            self._streaming,
            self._applied_everything,
            self._wait,
            self.say,
        )

    def _resync_run(self, dsn: str) -> resync_phase.ResyncRun:
        load = self._load(dsn)
        return resync_phase.ResyncRun(
            source.settings_for_bench(self.settings),
            dsn,
            self.env,
            self.out_dir,
            self.connector,
            [f"public.{t}" for t in source.TABLES],
            lambda rate, seconds: load(rate, seconds, 31),
            self._streaming,
            self._wait,
            self.say,
        )

    def _tables(self) -> dict[str, Path]:
        """Each topic's base table."""
        return {t: self.table(n) for n, t in zip(source.TABLES, source.topics(), strict=True)}

    def _pipeline_log(self) -> Path:
        return self.out_dir / "pipeline.log"  # the streaming run's, for its rounds' figures

    def _load(self, dsn: str) -> Load:
        def load_at(rate: float, seconds: float, seed: int) -> PgbenchRun:
            pgbench = self.settings.postgres_bin / "pgbench"
            return run_pgbench(pgbench, dsn, rate, seconds, self.out_dir / "load", seed=seed)

        return load_at

    # --- waiting --------------------------------------------------------------------------------
    def _wait(
        self,
        ready: Callable[[], bool],
        what: str,
        timeout_s: float,
        required: bool = True,
        progress: Callable[[], str] | None = None,
    ) -> None:
        wait_saying(ready, what, timeout_s, self.say, required, progress)

    def _streaming(self) -> bool:
        try:
            doc = json.loads((self.settings.run_dir / "pipeline.json").read_text())
        except (OSError, json.JSONDecodeError):
            return False
        states = {t: v["state"] for t, v in doc.get("tables", {}).items()}
        return all(states.get(t) == "running" for t in source.TABLES)

    def _applied_everything(self) -> bool:
        return quiet_tail.in_base_tables(self.settings.kafka_bootstrap, self._tables())

    # --- figures ----------------------------------------------------------------------------------
    def _results(
        self,
        steps: list[Step],
        moments: dict[str, Any],
        usage: Mapping[str, Any],
        started_at: str,
        began: float,
    ) -> dict[str, Any]:
        o, f = self.options, self.figures
        tables = self._tables()
        freshness, seen = freshness_figures(
            self.settings.kafka_bootstrap, tables, moments["ends"], moments["index"], self.say
        )
        judged = [judged_by_freshness(s, seen, o.step_s, o.max_lag_s) for s in steps]
        for number, (step, result) in enumerate(zip(steps, judged, strict=True), 1):
            if step.result.bounded and not result.bounded:
                self.say(
                    f"bench: step {number}: a change committed during it waited over"
                    f" {o.max_lag_s:.0f} s for Delta: not bounded after all"
                )
        sustained = sustained_figures(judged)
        return {
            "started_at": started_at,
            "duration_s": time.monotonic() - began,
            "machine": machine_info(version("pyspark")),
            "params": {
                "rows": f["rows"],
                "rate": o.rate,
                "seconds": o.step_s,
                "step_rates": [s.result.target_rate for s in steps],
                "settle_s": o.settle_s,
                "max_lag_s": o.max_lag_s,
            },
            "snapshot": f["snapshot"],
            "sustained": sustained,
            "freshness": freshness,
            "stages": f["stages"],
            "apply_cpu_per_1000": f.get("apply_cpu_per_1000"),
            "records": f.get("records"),
            "baseline": {
                "snapshot_rows_per_s": f["baseline_snapshot_per_s"],
                "highest_bounded_rate": f["baseline_sustained"]["highest_bounded_rate"],
                "apply_changes_per_s": f["baseline_apply_per_s"],
                "apply_cpu_per_1000": f.get("baseline_apply_cpu_per_1000"),
                "freshness": {"delta": f["baseline_freshness"], "search": None},
                "steps": f["baseline_sustained"]["steps"],
            },
            "ratios": {},
            "resources": {name: u.as_dict() for name, u in usage.items()},
            "timeline": timeline(steps, seen),
            "query": f.get("query"),
            "quiet": f.get("quiet"),
            "rounds": round_figures(self._pipeline_log().read_text(errors="replace").splitlines()),
            "views": f.get("views"),
            "verify_cost": f.get("verify_cost"),
            "resync": f.get("resync"),
            "step_cpu": self.cpu.as_dict(),
        }


def _no_history(lake_json: Path) -> str:
    options = json.loads(lake_json.read_text())
    return json.dumps({k: v for k, v in options.items() if k != "history"})
