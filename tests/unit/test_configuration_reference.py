"""docs/configuration.md lists exactly the CHANGELAKE_* variables the code reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = re.compile(r"\bCHANGELAKE_[A-Z0-9_]+\b")


def _in_code() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "changelake").rglob("*.py"):
        found |= set(VARIABLE.findall(path.read_text()))
    return found


def _documented() -> set[str]:
    rows = (ROOT / "docs" / "configuration.md").read_text().splitlines()
    return {m.group(1) for row in rows if (m := re.match(r"\| `(CHANGELAKE_[A-Z0-9_]+)` \|", row))}


def test_every_variable_the_code_reads_is_documented() -> None:
    missing = _in_code() - _documented()
    assert not missing, f"add to docs/configuration.md: {sorted(missing)}"


def test_every_documented_variable_is_read() -> None:
    stale = _documented() - _in_code()
    assert not stale, f"docs/configuration.md lists variables nothing reads: {sorted(stale)}"
