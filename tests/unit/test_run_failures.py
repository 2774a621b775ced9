"""What `changelake run` tells a user when a table's batch fails unexpectedly."""

from __future__ import annotations

from changelake.apply.streaming_failure import cause

SPARK_FAILURE = """[STREAM_FAILED] Query [id = 1] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/x/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/x/changelake/apply.py", line 92, in apply
    self._prepare(decoded, previous, key)
pyspark.errors.exceptions.captured.AnalysisException: [DELTA_MERGE_MATERIALIZE_SOURCE_FAILED_REPEATEDLY] Keeping the source of the MERGE statement materialized has failed repeatedly.
 SQLSTATE: 39000
org.apache.spark.sql.execution.streaming.sources.ForeachBatchUserFuncException: wrapped
"""  # noqa: E501


def test_the_innermost_cause_is_reported_not_the_wrappers() -> None:
    assert cause(SPARK_FAILURE) == (
        "pyspark.errors.exceptions.captured.AnalysisException: "
        "[DELTA_MERGE_MATERIALIZE_SOURCE_FAILED_REPEATEDLY] Keeping the source of the MERGE "
        "statement materialized has failed repeatedly."
    )


def test_a_python_error_in_our_code_is_named() -> None:
    text = SPARK_FAILURE.replace(
        "pyspark.errors.exceptions.captured.AnalysisException: [DELTA", "KeyError: 'id' [DELTA"
    )
    assert cause(text).startswith("KeyError: 'id'")


def test_an_unrecognised_failure_keeps_its_first_line() -> None:
    assert cause("something odd\nmore") == "something odd"
    assert cause("") == "unknown failure"
