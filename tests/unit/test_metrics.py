"""A run's Prometheus metrics from its state (changelake/apply/metrics.py), and the compose file's
Prometheus and Grafana reading exactly those."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import yaml
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from changelake.apply.metrics import RunMetrics
from changelake.apply.run_state import TableJob
from changelake.settings import load_settings
from changelake.tables import TableRef
from tests.compose_files import ROOT


def _job(name: str, state: str, **stats: Any) -> TableJob:
    job = TableJob(TableRef("public", name, f"shop.public.{name}", "shop", "slot"), state=state)
    if stats:
        job.count(stats)
    return job


def _text(jobs: dict[str, TableJob], connectors: Any = None) -> str:
    def report() -> dict[str, Any]:
        if connectors is None:
            raise ConnectionError("Connect is down")
        return dict(connectors)

    registry = CollectorRegistry()
    registry.register(RunMetrics(jobs, report, dict))
    return generate_latest(registry).decode()


def _sample(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    shown = f"{name}{{{wanted}}}" if labels else name
    line = re.search(rf"^{re.escape(shown)} (\S+)$", text, re.M)
    assert line, f"no {name}{{{wanted}}} in:\n{text}"
    return float(line.group(1))


def test_each_table_s_state_counts_and_freshness_come_from_the_run() -> None:
    newest = "2026-01-01T00:00:00+00:00"
    orders = _job("orders", "running", changes=40, errors=2, max_lsn=900, seconds=1.5)
    orders.count({"changes": 10, "max_lsn": 800, "seconds": 0.5, "max_source_ts": newest})
    orders.counted_at = (
        datetime.fromisoformat(newest).timestamp() + 3.0
    )  # committed 3 s after its newest change's source commit
    stopped = _job("customers", "stopped")
    text = _text({"orders": orders, "customers": stopped})

    assert _sample(text, "changelake_table_state", table="orders", state="running") == 1
    assert _sample(text, "changelake_table_state", table="orders", state="stopped") == 0
    assert _sample(text, "changelake_table_state", table="customers", state="stopped") == 1
    assert _sample(text, "changelake_table_batches_total", table="orders") == 2
    assert _sample(text, "changelake_table_changes_total", table="orders") == 50
    assert _sample(text, "changelake_table_dead_letters_total", table="orders") == 2
    assert _sample(text, "changelake_table_applied_lsn", table="orders") == 900  # the highest
    assert _sample(text, "changelake_table_last_batch_seconds", table="orders") == 0.5
    assert _sample(text, "changelake_table_freshness_seconds", table="orders") == 3.0


def test_connect_down_leaves_its_figures_out_and_counts_the_error() -> None:
    up = {"shop": {"state": "RUNNING", "tasks": [{"id": 0, "state": "FAILED"}]}}
    text = _text({}, up)
    assert _sample(
        text, "changelake_connector_task_state", connector="shop", task="0", state="FAILED"
    )
    down = _text({})
    assert "changelake_connector_task_state{" not in down
    assert _sample(down, "changelake_metrics_scrape_errors_total") == 1


def test_the_dashboard_queries_only_metrics_the_run_serves() -> None:
    up = {"c": {"state": "RUNNING", "tasks": [{"id": 0, "state": "RUNNING"}]}}
    text = _text({"t": _job("t", "running")}, up)
    served = set(re.findall(r"^# TYPE (\w+) (\w+)$", text, re.M))
    names = {n for n, _ in served} | {f"{n}_total" for n, kind in served if kind == "counter"}
    dashboard = json.loads((ROOT / "docker/grafana/dashboards/changelake.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queried = {m for e in exprs for m in re.findall(r"\bchangelake_\w+", e)}
    assert queried and queried <= names, queried - names


def test_prometheus_scrapes_the_pipeline_where_it_serves() -> None:
    config = yaml.safe_load((ROOT / "docker/prometheus/prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    (static,) = job["static_configs"]
    assert static["targets"] == [f"pipeline:{load_settings({}).metrics_port}"]
    source = yaml.safe_load(
        (ROOT / "docker/grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    assert source["datasources"][0]["url"] == "http://prometheus:9090"
