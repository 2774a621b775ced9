"""`changelake bench`: a run, its report beside an earlier run's when one is named, or (with
`--report DIR`) no run, only the report written again from the results a run left in DIR."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path

from changelake.bench.beside import read_results
from changelake.bench.command import Bench
from changelake.bench.options import BenchOptions
from changelake.bench.report import write_report
from changelake.exceptions import ConfigError
from changelake.settings import Settings


def bench(
    settings: Settings, options: BenchOptions, beside: Path | None, report_dir: Path | None
) -> int:
    if importlib.util.find_spec("matplotlib") is None:  # an hour in, the figure would fail
        raise ConfigError(
            "changelake bench draws its figure with matplotlib, which is not installed",
            "install the bench extra: pip install -e '.[bench]' (`make setup` does)",
        )
    earlier = read_results(beside) if beside else None  # a bad file named before an hour's run
    if report_dir:
        md = write_report(read_results(report_dir / "results.json"), report_dir, earlier)[1]
        print(f"bench: report in {md}")
        return 0
    out_dir = settings.home / "bench" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    print(f"bench: results and logs in {out_dir}")
    Bench(settings, options, out_dir, lambda line: print(line, flush=True)).run(earlier)
    return 0
