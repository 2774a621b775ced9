"""How the benchmark report writes numbers and tables in markdown, shared by its sections."""

from __future__ import annotations

from collections.abc import Callable, Sequence

MISSING = "\u2013"  # an en dash: an empty cell, not a minus sign
TIMES = "\u00d7"  # the multiplication sign after a ratio


def count(value: float) -> str:
    return f"{value:,.0f}"


def seconds(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}" if value < 100 else count(value)


def number(value: float) -> str:
    """A figure of any size: whole above 100, two decimals below."""
    return count(value) if value >= 100 else f"{value:,.2f}"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def cell(value: float | None, show: Callable[[float], str]) -> str:
    return MISSING if value is None else show(value)


def ratio_cell(a: float | None, b: float | None) -> str:
    return cell(ratio(a, b), lambda r: f"{r:.2f}{TIMES}")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)
