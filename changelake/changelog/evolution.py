"""Reconcile a table's stored columns with the columns its newest events carry.

A column added at the source is added to the table; a type that only widens (int → bigint,
numeric(10,2) → numeric(12,2), real → double) is widened; anything else would lose or reinterpret
data, so it stops that table with an error naming the table and the column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import types as T

from changelake.changelog.exceptions import SchemaError

_INTEGER_RANK = {"byte": 0, "short": 1, "integer": 2, "long": 3}


@dataclass(frozen=True)
class Evolution:
    add: tuple[T.StructField, ...] = ()
    widen: tuple[T.StructField, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.add and not self.widen


def widens(old: T.DataType, new: T.DataType) -> bool:
    """True when every value of `old` is exactly a value of `new`."""
    if old == new:
        return True
    if isinstance(old, T.DecimalType) and isinstance(new, T.DecimalType):
        return new.scale >= old.scale and (new.precision - new.scale) >= (old.precision - old.scale)
    old_rank = _INTEGER_RANK.get(old.typeName())
    new_rank = _INTEGER_RANK.get(new.typeName())
    if old_rank is not None and new_rank is not None:
        return new_rank >= old_rank
    if isinstance(old, T.FloatType) and isinstance(new, T.DoubleType):
        return True
    if isinstance(old, T.ArrayType) and isinstance(new, T.ArrayType):
        return old.elementType == new.elementType
    return False


def reconcile(
    table: str,
    stored: T.StructType,
    incoming: T.StructType,
    stored_key: Sequence[str],
    incoming_key: Sequence[str],
) -> Evolution:
    """What to change in the stored table so the incoming columns fit, or a SchemaError."""
    if stored_key and tuple(stored_key) != tuple(incoming_key):
        raise SchemaError(
            f"table {table}: the primary key changed from ({', '.join(stored_key)}) to "
            f"({', '.join(incoming_key)}); the derived table stops here",
            f"re-snapshot it: `changelake run --resnapshot {table}`",
        )
    have = {f.name: f.dataType for f in stored.fields}
    add, widen = [], []
    for field in incoming.fields:
        old = have.get(field.name)
        if old is None:
            add.append(T.StructField(field.name, field.dataType))
        elif old != field.dataType:
            if not widens(old, field.dataType):
                raise SchemaError(
                    f"table {table}, column {field.name}: type changed from "
                    f"{old.simpleString()} to {field.dataType.simpleString()}, which would lose "
                    "or reinterpret data; the derived table stops here",
                    f"re-snapshot it: `changelake run --resnapshot {table}`",
                )
            widen.append(T.StructField(field.name, field.dataType))
    return Evolution(tuple(add), tuple(widen))
