"""What scripts and healthchecks read from the CLI: `--version`, and the exit codes of `status`
and `connectors status` (0 healthy, 3 something needs a person, 4 nothing runs), one meaning
per code across commands."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from changelake import __version__, exit_codes
from changelake.capture import connector_status
from changelake.read import status
from changelake.settings import dotenv_defaults
from tests.support import changelake


def report(running: bool, problems: list[str], **table: Any) -> dict[str, Any]:
    row = {"state": "running", "error": None, **table}
    return {"pipeline": {"running": running}, "tables": {"orders": row}, "problems": problems}


@pytest.mark.parametrize(
    ("given", "code"),
    [
        (report(True, []), 0),
        (report(False, [], state="not running"), 4),
        (report(True, ["slot changelake_shop holds 2 GiB of WAL"]), 3),
        (report(False, [], state="stopped", error="its topic was deleted"), 3),
        (report(True, [], state="failed"), 3),
    ],
)
def test_status_exit_codes(given: dict[str, Any], code: int) -> None:
    assert status.exit_code(given) == code


def connector(state: str, *tasks: str) -> dict[str, Any]:
    return {"state": state, "tasks": [{"id": i, "state": s} for i, s in enumerate(tasks)]}


@pytest.mark.parametrize(
    ("given", "code"),
    [
        ({"shop": connector("RUNNING", "RUNNING")}, 0),
        ({}, 4),
        ({"shop": connector("RUNNING", "FAILED")}, 3),
        ({"shop": connector("RUNNING")}, 3),  # no task yet
        ({"shop": connector("RUNNING", "RUNNING"), "crm": connector("PAUSED", "PAUSED")}, 3),
    ],
)
def test_connectors_status_exit_codes(given: dict[str, Any], code: int) -> None:
    assert connector_status.exit_code(given) == code


def test_the_version_is_the_package_s() -> None:
    assert changelake("--version").stdout.strip() == f"changelake {__version__}"


@pytest.mark.parametrize(
    ("tables", "alive", "code", "said"),
    [
        ({"orders": {"state": "running"}}, True, 0, "1 tables, none stopped or failed"),
        ({"orders": {"state": "stopped", "error": "its topic was deleted"}}, True, 3, "orders"),
        ({"orders": {"state": "running"}}, False, 4, "no pipeline runs"),
    ],
)
def test_pipeline_healthcheck_reads_the_run_state_file(
    tmp_path: Path, tables: dict[str, Any], alive: bool, code: int, said: str
) -> None:
    """`status --pipeline`, the compose healthcheck, as a process: its exit code and line from
    pipeline.json, believed only while the pid it names runs."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    pid = os.getpid() if alive else _a_pid_that_is_gone()
    (home / "run" / "pipeline.json").write_text(json.dumps({"pid": pid, "tables": tables}))
    env = {**os.environ, "CHANGELAKE_HOME": str(home)}
    done = changelake("status", "--pipeline", env=env, check=False)
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stdout


def _a_pid_that_is_gone() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_cli_takes_changelake_settings_from_the_project_s_env_file(tmp_path: Path) -> None:
    """The host CLI reaches a compose stack with the settings docker compose reads from .env:
    CHANGELAKE_* names only, and never over the environment."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    tables = {"orders": {"state": "running"}}
    (home / "run" / "pipeline.json").write_text(json.dumps({"pid": os.getpid(), "tables": tables}))
    (tmp_path / ".env").write_text(
        f"# compose's file\nCHANGELAKE_HOME={home}\nCOMPOSE_PROJECT_NAME=other\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CHANGELAKE_HOME"}
    done = changelake("--project", str(tmp_path), "status", "--pipeline", env=env, check=False)
    assert (done.returncode, done.stdout.strip()) == (
        0,
        f"pipeline pid {os.getpid()}, 1 tables, none stopped or failed",
    )

    assert dotenv_defaults(tmp_path) == {"CHANGELAKE_HOME": str(home)}  # not compose's names
    elsewhere = {**env, "CHANGELAKE_HOME": str(tmp_path / "elsewhere")}  # the environment wins
    done = changelake(
        "--project", str(tmp_path), "status", "--pipeline", env=elsewhere, check=False
    )
    assert done.returncode == 4, done.stdout


def test_a_usage_error_has_a_code_of_its_own() -> None:
    """argparse's 2 means only "the command line is wrong": no command exits 2 for anything
    else (the codes' one meaning each is in changelake/exit_codes.py)."""
    wrong = changelake("status", "--no-such-flag", check=False)
    assert wrong.returncode == exit_codes.USAGE == 2
    codes = {v for k, v in vars(exit_codes).items() if k.isupper()}
    assert len(codes) == len([k for k in vars(exit_codes) if k.isupper()])  # none shared
