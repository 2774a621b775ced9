"""Connect's failures read as one sentence and the next step, never as a Java trace."""

from __future__ import annotations

from changelake.capture.failures import MAX_LINE, explain

FRAMES = "\n\tat io.debezium.connector.common.BaseSourceTask.start(BaseSourceTask.java:286)" * 20


def test_a_gone_position_names_the_connector_and_how_to_start_again() -> None:
    trace = (
        "io.debezium.DebeziumException: The connector is trying to read change stream starting "
        "at PostgresOffsetContext [lsn=LSN{1/BCB0A0F0}], but this is no longer available on the "
        "server. Reconfigure the connector to use a snapshot mode when needed." + FRAMES
    )
    sentence, step = explain("orders-db", trace)
    assert "orders-db" in sentence and "\n" not in sentence and "BaseSourceTask" not in sentence
    assert "`changelake run` re-syncs it by itself" in step


def test_a_table_without_a_key_is_named_as_the_cause() -> None:
    trace = (
        "org.apache.kafka.connect.errors.ConnectException: Unrecoverable exception from producer "
        "send callback\nCaused by: org.apache.kafka.common.errors.InvalidRecordException: "
        "Compacted topic cannot accept message without key in topic partition shop.public.log-0."
        + FRAMES
    )
    sentence, step = explain("shop-postgres", trace)
    assert "without a primary key" in sentence and "message.key.columns" in step


def test_an_unknown_failure_shows_its_first_line_only() -> None:
    sentence, step = explain("x", "java.lang.IllegalStateException: " + "y" * 1000 + FRAMES)
    assert sentence.startswith("connector x failed: java.lang.IllegalStateException: yyy")
    assert len(sentence) <= len("connector x failed: ") + MAX_LINE
    assert "\n" not in sentence and "Connect's log" in step


def test_a_record_over_the_limit_is_named_with_its_size_and_the_settings_to_raise() -> None:
    trace = (
        "org.apache.kafka.connect.errors.ConnectException: Unrecoverable exception from producer "
        "send callback\nCaused by: org.apache.kafka.common.errors.RecordTooLargeException: The "
        "message is 70000000 bytes when serialized which is larger than 67108864, which is the "
        "value of the max.request.size configuration." + FRAMES
    )
    sentence, step = explain("docs-db", trace)
    assert sentence == (
        "docs-db produced a change record of 70000000 bytes, over the 67108864 bytes its "
        "producer accepts (max.request.size), so capture of every table of this connector stopped"
    )
    assert "failed to send record to <topic>" in step and "MAX_RECORD_BYTES" in step
    broker = "RecordTooLargeException: The request included a message larger than the max"
    assert "larger than Kafka accepts" in explain("docs-db", broker + FRAMES)[0]


def test_a_nan_in_precise_mode_names_the_column_and_the_mode_that_carries_it() -> None:
    trace = (
        "org.apache.kafka.connect.errors.ConnectException: An exception occurred in the change "
        "event producer. This connector will be stopped.\nCaused by: org.apache.kafka.connect."
        "errors.ConnectException: Got a special value (NaN/Infinity) for Decimal type in column "
        "amount but current mode does not handle it. If you need to support it then set decimal "
        "handling mode to 'string'." + FRAMES
    )
    sentence, step = explain("billing", trace)
    assert sentence == (
        "billing read NaN in numeric column amount, which its decimal.handling.mode (precise) "
        "cannot send, so capture of every table of this connector stopped"
    )
    assert '"decimal.handling.mode": "string"' in step and "column.propagate" in step
