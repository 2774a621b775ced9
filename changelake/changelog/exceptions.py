"""Errors of decoding change events."""

from __future__ import annotations

from changelake.exceptions import ChangelakeError


class SchemaError(ChangelakeError):
    """An event's schema the pipeline cannot read, or cannot reconcile with its table: final for
    that table, which stops while the others go on."""
