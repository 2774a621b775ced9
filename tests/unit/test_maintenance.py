"""Reading a table's deleted-file retention, below which `maintain` refuses to VACUUM."""

from __future__ import annotations

import pytest

from changelake.exceptions import ConfigError
from changelake.sinks.maintenance import interval_hours


@pytest.mark.parametrize(
    ("text", "hours"),
    [
        ("interval 1 week", 168.0),
        ("interval 7 days", 168.0),
        ("interval 36 hours", 36.0),
        ("INTERVAL 1 day 12 hours", 36.0),
        ("interval 90 minutes", 1.5),
    ],
)
def test_delta_intervals_in_hours(text: str, hours: float) -> None:
    assert interval_hours(text) == pytest.approx(hours)


def test_an_unknown_unit_is_named() -> None:
    with pytest.raises(ConfigError, match="unit 'fortnights'"):
        interval_hours("interval 1 fortnights")
