"""Compare one key range: a hash per row over the source's columns, then the columns of rows
whose hashes differ. Counts for the whole table, a bounded sample of keys for the report. Only
the source's columns are compared: a column dropped (or renamed) at the source keeps its last
values in the lake, by design, and `status` names it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from changelake.verify.ranges import Key

SAMPLE = 10  # keys shown per kind of difference


NO_COLUMN = "<no column>"


def row_hash(row: dict[str, Any]) -> bytes:
    return hashlib.blake2b(repr(sorted(row.items())).encode(), digest_size=16).digest()


def as_source(source: dict[str, Any], lake: dict[str, Any]) -> dict[str, Any]:
    """The lake's row in the source row's columns (those it lacks as NO_COLUMN)."""
    return {c: lake.get(c, NO_COLUMN) for c in source}


@dataclass
class Differences:
    target: str  # "delta" or "index"
    rows: int = 0  # source rows compared
    missing: int = 0
    extra: int = 0
    differing: int = 0
    samples: list[str] = field(default_factory=list)
    # Keys whose source row the derived side lacks or holds otherwise: what a repair re-sends.
    resend: list[Key] = field(default_factory=list, repr=False)

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.differing)

    def add(self, source: dict[Key, dict[str, Any]], derived: dict[Key, dict[str, Any]]) -> None:
        self.rows += len(source)
        missing = sorted(source.keys() - derived.keys(), key=repr)
        extra = sorted(derived.keys() - source.keys(), key=repr)
        self.missing += len(missing)
        self.extra += len(extra)
        self._sample("missing", missing)
        self._sample("extra", extra)
        self.resend += missing
        for k in sorted(source.keys() & derived.keys(), key=repr):
            if row_hash(source[k]) == row_hash(as_source(source[k], derived[k])):
                continue
            self.differing += 1
            self.resend.append(k)
            if self._room("differing"):
                got = as_source(source[k], derived[k])
                self.samples.append(f"differing {_key(k)}: {columns(source[k], got)}")

    def _sample(self, kind: str, keys: list[Key]) -> None:
        for k in keys:
            if not self._room(kind):
                return
            self.samples.append(f"{kind} {_key(k)}")

    def _room(self, kind: str) -> bool:
        return sum(s.startswith(kind) for s in self.samples) < SAMPLE


def columns(source: dict[str, Any], derived: dict[str, Any]) -> str:
    """The columns that differ, with both values (shortened)."""
    parts = []
    for c in {**source, **derived}:
        want, got = source.get(c, NO_COLUMN), derived.get(c, NO_COLUMN)
        if want != got:
            parts.append(f"{c}: source {want!r:.80} derived {got!r:.80}")
    return "; ".join(parts)


def _key(k: Key) -> str:
    return str(k[0]) if len(k) == 1 else "(" + ", ".join(str(v) for v in k) + ")"
