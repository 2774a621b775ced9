"""What the pipeline hands Spark: jars beside the pyspark wheel's own, at versions that agree with
it, Hadoop's S3A settings for a lake on object storage, and a session whose API calls stay cheap
on the driver."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from changelake.settings import Settings
from changelake.spark import artifact_name, s3a_conf
from tests.support import pom_property


def test_hadoop_aws_is_the_hadoop_the_wheel_ships(settings: Settings) -> None:
    """S3A's classes are compiled against one Hadoop release; a different hadoop-aws beside the
    wheel's hadoop-client jars fails at the first s3a:// path with NoSuchMethodError."""
    bundled = Path(pyspark.__file__).parent / "jars"
    shipped = {
        jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
        for jar in bundled.glob("hadoop-client-api-*.jar")
        if artifact_name(jar.name) == "hadoop-client-api"
    }
    assert shipped == {pom_property(settings.root / "pom.xml", "hadoop.version")}


def test_an_s3_compatible_server_is_reached_by_url_with_path_style_and_its_keys(
    settings: Settings,
) -> None:
    server = replace(settings, s3_endpoint="http://s3:7070", s3_region="eu-west-1")
    env = {
        "AWS_ACCESS_KEY_ID": "aws-access",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "CHANGELAKE_S3_ACCESS_KEY": "own-access",  # changelake's names win
    }
    assert s3a_conf(server, env) == {
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1",
        "spark.hadoop.fs.s3a.endpoint": "http://s3:7070",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": "own-access",
        "spark.hadoop.fs.s3a.secret.key": "aws-secret",
    }
    tls = s3a_conf(replace(server, s3_endpoint="https://objects.example:443"), {})
    assert tls["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"


def test_aws_itself_needs_no_endpoint_and_keys_stay_with_the_default_chain(
    settings: Settings,
) -> None:
    """Without an endpoint or keys, S3A finds AWS and its credentials (instance roles, profiles)
    as it always does: nothing is set that would override them."""
    assert s3a_conf(replace(settings, s3_endpoint="", s3_region=""), {}) == {}


def test_a_column_expression_costs_the_driver_one_call_into_the_jvm_not_thirteen(
    spark: SparkSession,
) -> None:
    """A table's batch builds hundreds of expressions on the driver. With PySpark's DataFrame
    debugging on, each also records its Python call site in the JVM: 13 py4j round trips for one
    `F.col`, one of them resolving `SparkSession` by its bare name through every jar. Without it,
    3: resolving `functions` by its bare name (a failed class lookup in each imported package),
    asking for its static `col`, calling it; the view remembers the first two (`jvm_lookups`)."""
    client = spark.sparkContext._gateway._gateway_client  # type: ignore[union-attr]
    sent: list[str] = []
    send = client.send_command

    caller = threading.get_ident()

    def counted(command: str, *args: Any, **kwargs: Any) -> Any:
        # A proxy of a JVM object released meanwhile sends "m d <id>" (memory, delete): earlier
        # tests' objects going, from whichever thread drops them, not round trips of this call.
        if threading.get_ident() == caller and not command.startswith("m\nd\n"):
            sent.append(command)
        return send(command, *args, **kwargs)

    F.col("warm")  # anything a first call caches
    integer = spark.sparkContext._jvm.java.lang.Integer  # type: ignore[union-attr]
    client.send_command = counted
    try:
        F.col("id")
        column = list(sent)
        for _ in range(2):  # a static field's value is asked for each time (it can change)
            assert integer.MAX_VALUE == 2**31 - 1
    finally:
        del client.send_command
    assert len(column) == 1, [c.splitlines()[:3] for c in column]
    assert len(sent) == 3, [c.splitlines()[:3] for c in sent]
