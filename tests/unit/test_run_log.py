"""`changelake run`'s lines: a time and a level before each, routine lines at INFO, a retry or a
re-send at WARNING, a stopped table at ERROR; to any other sink the same text."""

from __future__ import annotations

import contextlib
import io
import re

from changelake import run_log


def said(line: str) -> str:
    run_log.configure()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # the handler writes to stdout as it is at the time
        run_log.say(line)
    return out.getvalue()


def test_each_line_has_its_time_and_level() -> None:
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}"
    assert re.fullmatch(
        rf"{stamp} INFO    orders: batch 1: 3 changes\n", said("orders: batch 1: 3 changes")
    )
    assert re.fullmatch(
        rf"{stamp} WARNING orders: batch failed \(x\); retrying in 5s\n",
        said(run_log.warning("orders: batch failed (x); retrying in 5s")),
    )
    assert re.fullmatch(
        rf"{stamp} ERROR   orders: STOPPED: gone\n", said(run_log.error("orders: STOPPED: gone"))
    )


def test_a_leveled_line_is_plain_text_elsewhere() -> None:
    line = run_log.error("orders: STOPPED: gone")
    assert line == "orders: STOPPED: gone" and f"[{line}]" == "[orders: STOPPED: gone]"
    collected: list[str] = []
    collected.append(line)  # what a test's `out` does
    assert collected == ["orders: STOPPED: gone"]


def test_configuring_twice_logs_each_line_once() -> None:
    run_log.configure()
    assert said("once").count("once") == 1
