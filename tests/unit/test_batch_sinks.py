"""A table's batch goes through its sinks in order: what comes before the commit is written
before it, the applier moves on only once the commit is written, and a failing sink stops the
batch where it failed (the restart replays it from the last commit)."""

from __future__ import annotations

from typing import Any

import pytest

from changelake.apply.batch_sinks import AppliedBatch, write_through
from changelake.apply.batch_stats import BatchStats
from changelake.lake.commits import CommitMeta


class Sink:
    def __init__(self, step: str, seen: list[str], commits: bool = False, fails: bool = False):
        self.step, self.commits, self.seen, self.fails = step, commits, seen, fails

    def setup(self) -> None:
        pass

    def write(self, batch: AppliedBatch) -> None:
        if self.fails:
            raise RuntimeError(f"{self.step} refused")
        self.seen.append(self.step)


def _batch() -> AppliedBatch:
    meta = CommitMeta("apply", "t", {"0": 5}, 10, None, ("id",))
    decoded: Any = None  # the fakes never read it
    return AppliedBatch(decoded, BatchStats(), meta, version=3)


def _sinks(seen: list[str], failing: str | None = None) -> list[Sink]:
    return [
        Sink("errors", seen, fails=failing == "errors"),
        Sink("history", seen, fails=failing == "history"),
        Sink("write", seen, commits=True, fails=failing == "write"),
        Sink("index", seen, fails=failing == "index"),
    ]


def test_each_sink_in_order_with_the_commit_noted_before_the_index() -> None:
    seen: list[str] = []
    batch = _batch()
    write_through(_sinks(seen), batch, lambda: seen.append("committed"), seen.append)
    assert seen == [
        "before-errors",
        "errors",
        "before-history",
        "history",
        "before-write",
        "write",
        "committed",
        "after-commit",
        "before-index",
        "index",
    ]
    assert set(batch.stats.phases) == {"errors", "history", "write", "index"}


@pytest.mark.parametrize("failing", ["history", "write"])
def test_a_sink_failing_before_or_at_the_commit_leaves_it_unnoted(failing: str) -> None:
    seen: list[str] = []
    with pytest.raises(RuntimeError, match=f"{failing} refused"):
        write_through(_sinks(seen, failing), _batch(), lambda: seen.append("committed"))
    assert "committed" not in seen
    assert "index" not in seen


def test_the_index_failing_after_the_commit_keeps_the_commit() -> None:
    """The base table holds the batch; the restart catches the index up from its versions."""
    seen: list[str] = []
    with pytest.raises(RuntimeError, match="index refused"):
        write_through(_sinks(seen, "index"), _batch(), lambda: seen.append("committed"))
    assert seen == ["errors", "history", "write", "committed"]
