"""`changelake bench` flags: the ones given reach BenchOptions; the rest keep its defaults."""

from __future__ import annotations

from changelake.bench.options import BenchOptions
from changelake.cli import build_parser
from changelake.commands import bench_options


def test_flags_not_given_keep_the_declared_defaults() -> None:
    assert bench_options(build_parser().parse_args(["bench"])) == BenchOptions()


def test_given_flags_reach_their_fields() -> None:
    args = build_parser().parse_args(
        [
            "bench",
            "--rows",
            "20000",
            "--rate",
            "50",
            "--steps",
            "2",
            "--step-seconds",
            "30",
            "--prefill-seconds",
            "20",
        ]
    )
    options = bench_options(args)
    assert (options.rows, options.rate, options.steps) == (20_000, 50.0, 2)
    assert (options.step_s, options.prefill_s) == (30.0, 20.0)
    assert options.rates == [50.0, 100.0]
    assert options.max_lag_s == BenchOptions().max_lag_s
