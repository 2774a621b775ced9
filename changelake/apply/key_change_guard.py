"""The running pipeline's answer to a key update whose new row Debezium never sent
(`changelake.changelog.key_changes` says how that happens): it asks Debezium to re-send that
key through an incremental snapshot (`changelake.capture.resend`), as `verify --repair` would, so
the row arrives through the log and the LSN guard applies it. Asking for a key that did arrive after
all re-sends one row nobody needed; never asking loses it for good, so a doubt resolves to ask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psycopg
from pyspark.sql import types as T

from changelake import kafka_io, run_log
from changelake.capture.resend import Request, send
from changelake.changelog.key_changes import FOLLOWS_WITHIN, KeyChange, Mark, unpaired
from changelake.exceptions import RetryableError
from changelake.tables import TableRef
from changelake.verify.ranges import KeyColumn

# How long a delete at a batch's end waits for its create: Debezium sends them together, so
# only a stopped Connect (the case that loses it) keeps it waiting this long.
FOLLOW_WAIT_S = 5.0
INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
Out = Callable[[str], None]


class KeyChangeGuard:
    def __init__(self, ref: TableRef, bootstrap: str, dsn: str, out: Out) -> None:
        self.ref, self.bootstrap, self.dsn, self.out = ref, bootstrap, dsn, out

    def check(
        self, marks: Sequence[Mark], ends: dict[str, int], key: Sequence[str], types: T.StructType
    ) -> int:
        """Re-send the new keys of this batch's key updates that lost their create; how many."""
        found = unpaired(marks, ends)
        lost = found.lost + [c for c in found.undecided if not self._followed(c)]
        if lost:
            self._resend(lost, key, types)
        return len(lost)

    def _followed(self, change: KeyChange) -> bool:
        keys = kafka_io.keys_after(
            self.bootstrap,
            self.ref.topic,
            change.partition,
            change.offset,
            FOLLOWS_WITHIN,
            FOLLOW_WAIT_S,
        )
        return change.new_key in keys

    def _resend(self, lost: list[KeyChange], key: Sequence[str], types: T.StructType) -> None:
        name = self.ref.name
        said = "; ".join(c.describe(key) for c in lost)
        columns = {f.name: f.dataType for f in types.fields}
        usable = all(isinstance(columns.get(k), (T.StringType, *INTEGRAL)) for k in key)
        if not self.ref.signal_table or not usable:
            why = (
                "its connector has no signal.data.collection"
                if not self.ref.signal_table
                else "its key is not text or integers"
            )
            self.out(
                run_log.error(
                    f"{name}: a key update's new row never reached the topic ({said}) and cannot "
                    f"be re-sent: {why}; `changelake run --resnapshot {name}` rebuilds the table"
                )
            )
            return
        request = Request(
            self.ref,
            [KeyColumn(k, isinstance(columns[k], T.StringType)) for k in key],
            [tuple(c.new_key.get(k) for k in key) for c in lost],
        )
        try:
            signal_id = send(self.dsn, self.ref.signal_table, [request])
        except psycopg.OperationalError as exc:  # Postgres restarting: the batch is tried again
            raise RetryableError(f"could not ask Debezium to re-send {said}: {exc}") from exc
        self.out(
            run_log.warning(
                f"{name}: a key update's new row never reached the topic ({said}): Connect "
                f"stored its offset between the delete and the create (debezium/dbz#2549); "
                f"asked {self.ref.connector} to re-send it (signal {signal_id})"
            )
        )
