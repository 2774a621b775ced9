"""Rounds of faults under load, each ended by `changelake verify`, and the summary."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from changelake.chaos.event_kill import EventTable
from changelake.chaos.faults import KINDS, FaultContext, inject
from changelake.chaos.pipeline_process import PipelineProcess
from changelake.chaos.workload import Workload
from changelake.exceptions import ChangelakeError
from changelake.settings import Settings

Say = Callable[[str], None]
LANDED = {  # what a fault's landing means, for the summary
    "stop-connect-in-bulk": "inside a bulk's COPY",
    "kill-connect-events": "made Debezium send events again",
}
RESEND_ASKED = re.compile(
    r"asked \S+ to re-send|asked it to re-send"
)  # guards, seams, verification


@dataclass(frozen=True)
class ChaosOptions:
    rounds: int = 6
    rate: float = 30.0  # workload transactions per second
    seed: int = 1
    gap_s: tuple[float, float] = (3.0, 12.0)  # load between faults: lands them mid-batch
    outage_s: tuple[float, float] = (5.0, 20.0)
    verify_timeout_s: float = 900.0
    trigger_s: float = 1.0
    # The connector whose stored offsets time the stop inside a bulk (any other one reading the
    # same database stores offsets past the COPY long before, which would call the window missed)
    # and whose offset the first-event fault sets.
    connector: str | None = None
    events: EventTable | None = None  # the event table the kill-connect-events fault inserts into


@dataclass
class RoundResult:
    number: int
    faults: list[str]
    transactions: int
    row_changes: int
    verify_s: float
    rows_compared: int
    differences: int
    report: dict[str, Any] = field(repr=False)


@dataclass
class ChaosSummary:
    rounds: list[RoundResult] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    landed: Counter[str] = field(default_factory=Counter)  # faults that landed (LANDED)
    resends: int = 0  # re-sends the pipeline asked for by itself (seams, lost key-update creates)

    @property
    def differences(self) -> int:
        return sum(r.differences for r in self.rounds)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rounds": len(self.rounds),
            "faults": dict(self.faults),
            "faults_total": self.faults.total(),
            "landed": dict(self.landed),
            "resends": self.resends,
            "transactions": sum(r.transactions for r in self.rounds),
            "row_changes": sum(r.row_changes for r in self.rounds),
            "rows_compared": sum(r.rows_compared for r in self.rounds),
            "differences": self.differences,
            "seconds": round(self.seconds, 1),
            "per_round": [
                {k: v for k, v in r.__dict__.items() if k != "report"} for r in self.rounds
            ],
        }

    def text(self) -> str:
        d = self.as_dict()
        lines = [
            f"chaos: {d['rounds']} rounds, {d['faults_total']} faults"
            f" in {d['seconds'] / 60:.1f} min",
            *(f"  {kind:<20} {self.faults[kind]:>4}{self._landed(kind)}" for kind in KINDS),
            f"  changes applied     {d['row_changes']:>8,} row changes in"
            f" {d['transactions']:,} transactions",
            f"  rows compared       {d['rows_compared']:>8,} (Delta and index, after every round)",
            f"  re-sends asked      {d['resends']:>8,} (by the pipeline, with nobody asking)",
            f"  differences         {d['differences']:>8,}",
        ]
        return "\n".join(lines)

    def _landed(self, kind: str) -> str:
        if kind not in self.landed:
            return ""
        where = LANDED.get(kind, "where meant")
        return f" ({self.landed[kind]} {where})"


def verify(env: Mapping[str, str], timeout_s: float, log: Path) -> dict[str, Any]:
    """`changelake verify --json` as a user runs it; its progress goes to the round's log."""
    with log.open("ab") as err:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "changelake.cli",
                "verify",
                "--json",
                "--timeout",
                str(timeout_s),
            ],
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=err,
            check=False,
        )
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise ChangelakeError(
            f"chaos: verify failed with code {done.returncode} and no report",
            hint=f"its output is in {log}",
        ) from None
    return report


def count(report: dict[str, Any], what: str) -> int:
    parts = [t[side] for t in report["tables"] for side in ("delta", "index") if t[side]]
    if what == "rows":
        return sum(int(p["rows"]) for p in parts)
    return sum(int(p["missing"]) + int(p["extra"]) + int(p["differing"]) for p in parts)


def resends_asked(log: Path) -> int:
    """How many re-sends the pipeline's log says it asked a connector for."""
    if not log.exists():
        return 0
    return sum(RESEND_ASKED.search(line) is not None for line in log.read_text().splitlines())


def samples(report: dict[str, Any]) -> list[str]:
    return [
        f"{t['table']} ({side}): {line}"
        for t in report["tables"]
        for side in ("delta", "index")
        if t[side]
        for line in t[side]["samples"]
    ]


class Chaos:
    def __init__(
        self,
        settings: Settings,
        env: Mapping[str, str],
        workload: Callable[[int], Workload],
        out_dir: Path,
        say: Say,
    ) -> None:
        """`env` is the environment of the `changelake run` and `verify` it starts (which
        connectors, lake and indexes); `workload(seed)` makes each round's load."""
        self.settings, self.env, self.workload = settings, env, workload
        self.out_dir, self.say = out_dir, say
        self.pipeline = PipelineProcess(env, out_dir / "pipeline.log")

    def run(self, options: ChaosOptions) -> ChaosSummary:
        rng = random.Random(options.seed)
        summary = ChaosSummary()
        began = time.monotonic()
        self.pipeline.args = ("--trigger-seconds", str(options.trigger_s))
        self.pipeline.start()
        ctx = FaultContext(
            self.settings,
            self.pipeline,
            rng,
            self.say,
            options.outage_s,
            connector=options.connector,
            events=options.events,
            landed=summary.landed,
        )
        try:
            for number in range(1, options.rounds + 1):
                result = self._round(number, options, ctx)
                summary.rounds.append(result)
                summary.faults.update(kind.split(":")[0] for kind in result.faults)
                summary.seconds = time.monotonic() - began
                if result.differences:  # the evidence is now: later rounds would bury it
                    self.say(f"round {number}: verify found {result.differences} differences:")
                    for line in samples(result.report):
                        self.say(f"  {line}")
                    break
        finally:
            self.pipeline.stop()
        summary.seconds = time.monotonic() - began
        summary.resends = resends_asked(self.out_dir / "pipeline.log")
        (self.out_dir / "summary.json").write_text(json.dumps(summary.as_dict(), indent=2))
        return summary

    def _round(self, number: int, options: ChaosOptions, ctx: FaultContext) -> RoundResult:
        kinds = list(KINDS)
        ctx.rng.shuffle(kinds)
        self.say(
            f"round {number}/{options.rounds}: load at {options.rate:g}/s; faults: "
            + ", ".join(kinds)
        )
        load = self.workload(options.seed * 1000 + number)
        ctx.workload = load
        load.start()
        done: list[str] = []
        for kind in kinds:
            time.sleep(ctx.rng.uniform(*options.gap_s))  # load flows between faults
            self.pipeline.check_alive()
            began = time.monotonic()
            what = inject(kind, ctx)
            done.append(kind)
            self.say(f"  {kind:<17} {what} ({time.monotonic() - began:.0f} s)")
        time.sleep(ctx.rng.uniform(*options.gap_s))
        report = load.stop()
        self.pipeline.check_alive()
        self.say(
            f"  load: {report.transactions:,} transactions, {report.row_changes:,} row "
            f"changes; verifying"
        )
        began = time.monotonic()
        verdict = verify(self.env, options.verify_timeout_s, self.out_dir / f"verify-{number}.log")
        took = time.monotonic() - began
        result = RoundResult(
            number,
            done,
            report.transactions,
            report.row_changes,
            took,
            count(verdict, "rows"),
            count(verdict, "differences"),
            verdict,
        )
        self.say(
            f"  verify: {result.rows_compared:,} rows compared in {took:.0f} s, "
            f"{result.differences} differences"
        )
        return result
