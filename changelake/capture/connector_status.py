"""`changelake connectors status`: each registered connector's and task's state, and an exit
code a healthcheck can read."""

from __future__ import annotations

from typing import Any

from changelake import exit_codes
from changelake.capture.connect_api import ConnectApi
from changelake.settings import Settings

# Exit codes of `connectors status` (README, "The command line").
HEALTHY, UNHEALTHY, NONE_REGISTERED = (
    exit_codes.OK,
    exit_codes.NEEDS_A_PERSON,
    exit_codes.NOT_RUNNING,
)


def status(settings: Settings) -> dict[str, Any]:
    api = ConnectApi(settings.connect_url)
    expanded: dict[str, Any] = api.get("/connectors?expand=status&expand=info")
    report = {}
    for name, item in sorted(expanded.items()):
        st = item["status"]
        report[name] = {
            "state": st["connector"]["state"],
            "tasks": [
                {"id": t["id"], "state": t["state"], "trace": t.get("trace")} for t in st["tasks"]
            ],
            "class": item["info"]["config"].get("connector.class"),
            "topic.prefix": item["info"]["config"].get("topic.prefix"),
            "slot.name": item["info"]["config"].get("slot.name"),
        }
    return report


def print_status(report: dict[str, Any]) -> None:
    if not report:
        print("no connectors registered (changelake connectors apply)")
    for name, item in report.items():
        tasks = ", ".join(f"{t['id']}:{t['state']}" for t in item["tasks"]) or "no tasks"
        print(f"  {name:<20} {item['state']:<10} tasks {tasks}  slot {item['slot.name']}")
        for task in item["tasks"]:
            if task["trace"]:
                print("    " + task["trace"].splitlines()[0])


def exit_code(report: dict[str, Any]) -> int:
    """HEALTHY when every connector and each of its tasks is RUNNING (and there is at least
    one), UNHEALTHY when any is not (FAILED, PAUSED, UNASSIGNED), NONE_REGISTERED otherwise."""
    if not report:
        return NONE_REGISTERED
    running = all(
        item["state"] == "RUNNING"
        and item["tasks"]
        and all(t["state"] == "RUNNING" for t in item["tasks"])
        for item in report.values()
    )
    return HEALTHY if running else UNHEALTHY
