"""The work a run does beside its streams: compaction of sealed changelog epochs, rounds of the
aggregate views (views.json), verification of the lake against the source (repairing what
differs), and its Prometheus metrics. A streaming run keeps each on threads of its own; a
`--once` run compacts and brings the views up to date on its own thread as it ends, and serves
no metrics and verifies nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from changelake.apply import endpoint, metrics
from changelake.apply.compactor import Compactor
from changelake.apply.pipeline_file import TableState
from changelake.apply.run_options import RunOptions
from changelake.apply.run_state import TableJob
from changelake.capture import connector_status
from changelake.capture.capture_health import Stall
from changelake.settings import Settings
from changelake.tables import TableRef, slot_sources
from changelake.verify.continuous import ContinuousVerifier
from changelake.verify.give_way import HEADROOM_S
from changelake.views.derived import DerivedView, derived_views
from changelake.views.maintenance import ViewMaintainer

if TYPE_CHECKING:
    from changelake.serve.served import ServedViews

GRACE_S = 30.0  # how long a stopping run lets a running compaction or view round finish


class Background:
    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        options: RunOptions,
        refs: Callable[[], list[TableRef]],
        out: Callable[[str], None],
        jobs: Mapping[str, TableJob],
        stalled: Callable[[], Mapping[str, Stall]] = dict,
    ):
        self.compactor = Compactor(
            spark, settings.lake, settings.run_dir, options.freshness_target_s, out
        )
        port = settings.metrics_port if options.metrics_port is None else options.metrics_port
        self.metrics_port, self.out = port, out
        self.metrics_server: Any = None  # serving, while a streaming run lasts
        # The views the run serves queries (serve/served.py), when it does: the endpoint
        # answers a query that cannot read served.json with them.
        self.served: ServedViews | None = None
        self.collector = metrics.RunMetrics(
            jobs,
            self.compactor,
            lambda: connector_status.status(settings),
            lambda: slot_sources(settings, refs()),
            stalled,
        )
        self.settings = settings

        def aggregates() -> list[DerivedView]:
            return [v for v in derived_views(settings, refs()) if v.stored_at]

        self.views = ViewMaintainer(spark, aggregates, options.views_seconds, out)

        def streaming() -> list[TableRef]:  # compared only while their stream applies them
            return [j.ref for j in list(jobs.values()) if j.state == TableState.RUNNING]

        def applied(table: str) -> dict[str, int]:
            job = jobs.get(table)
            return dict(job.offsets) if job is not None else {}

        self.verifier = ContinuousVerifier(
            spark,
            settings,
            options.verify_share,
            streaming,
            applied,
            out,
            room=lambda: self.compactor.leaves_room(HEADROOM_S),
        )

    def start(self) -> None:
        self.compactor.start()
        self.views.start()
        self.verifier.start()
        if self.metrics_port:
            self.metrics_server = endpoint.serve(
                self.settings, self.metrics_port, self.collector, lambda: self.served, self.out
            )

    def stop(self) -> None:
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()  # the port, free for the next run at once
        self.verifier.stop(wait_s=0)  # it only reads (and asks for re-sends): nothing to finish
        self.compactor.stop(wait_s=GRACE_S)
        self.views.stop(wait_s=GRACE_S)

    def finish(self, jobs: Iterable[TableJob]) -> None:
        """As a `--once` run ends: every table it finished compacted (its base table alone is
        current, for readers that know nothing of the changelog), then every aggregate view
        brought up to date."""
        for job in jobs:
            if job.state == TableState.DONE and job.applier is not None:
                sealed = job.applier.seal()
                if sealed is not None:
                    self.compactor.run(sealed)
        self.views.run_all()
