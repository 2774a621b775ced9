"""The work a run does beside its streams: compaction of sealed changelog epochs, and rounds of
the aggregate views (views.json). A streaming run keeps both on threads of their own; a `--once`
run does both on its own thread as it ends."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pyspark.sql import SparkSession

from pipelines.apply.compactor import Compactor
from pipelines.apply.run_options import RunOptions
from pipelines.apply.run_state import TableJob
from pipelines.apply.view_maintenance import ViewMaintainer
from pipelines.read.views import DerivedView, derived_views
from pipelines.settings import Settings
from pipelines.tables import TableRef

GRACE_S = 30.0  # how long a stopping run lets a running compaction or view round finish


class Background:
    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        options: RunOptions,
        refs: Callable[[], list[TableRef]],
        out: Callable[[str], None],
    ):
        self.compactor = Compactor(
            spark, settings.lake, settings.run_dir, options.freshness_target_s, out
        )

        def aggregates() -> list[DerivedView]:
            return [v for v in derived_views(settings, refs()) if v.stored_at]

        self.views = ViewMaintainer(spark, aggregates, options.views_seconds, out)

    def start(self) -> None:
        self.compactor.start()
        self.views.start()

    def stop(self) -> None:
        self.compactor.stop(wait_s=GRACE_S)
        self.views.stop(wait_s=GRACE_S)

    def finish(self, jobs: Iterable[TableJob]) -> None:
        """As a `--once` run ends: every table it finished compacted (its base table alone is
        current, for readers that know nothing of the changelog), then every aggregate view
        brought up to date."""
        for job in jobs:
            if job.state == "done" and job.applier is not None:
                sealed = job.applier.seal()
                if sealed is not None:
                    self.compactor.run(sealed)
        self.views.run_all()
