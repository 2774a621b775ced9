"""Beyond one machine: `changelake run --master spark://…` on a Spark standalone cluster (its
executors are processes the worker starts, not threads in the driver), with the lake and the
streaming checkpoints on an S3-compatible server (s3a://): the snapshot taken into the bucket,
the changes applied by the cluster from the checkpoints there, the derived table equal to the
source. On the real Postgres, Connect, Kafka, a real Spark master and worker, and a real S3
server."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pyspark.sql import SparkSession

from changelake.settings import Settings
from changelake.spark import s3a_conf
from tests.compare import assert_same
from tests.integration.pipeline_fixtures import Pipeline
from tests.s3_server import S3Server, s3_server
from tests.spark_cluster import standalone_cluster
from tests.support import changelake


def read_bucket(spark: SparkSession, settings: Settings, s3: S3Server) -> None:
    """Let the suite's own session read the test's bucket: its S3A settings, for that bucket
    only (Hadoop's per-bucket keys), so no other test's paths change."""
    conf = spark._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    server = replace(settings, s3_endpoint=s3.endpoint)
    for name, value in s3a_conf(server, s3.env()).items():
        conf.set(name.replace("spark.hadoop.fs.s3a.", f"fs.s3a.bucket.{s3.bucket}."), value)


def test_a_cluster_applies_snapshot_and_changes_to_a_lake_on_s3(
    pipeline: Callable[..., Pipeline], settings: Settings, tmp_path: Path, unique: str
) -> None:
    table = f"far_{unique}"
    p = pipeline(
        [table],
        [
            f"CREATE TABLE public.{table} (site int, sku text, qty int, price numeric(12,2),"
            " PRIMARY KEY (site, sku))",
            f"INSERT INTO public.{table} SELECT s % 5, 'sku' || s, s, s * 1.25"
            " FROM generate_series(1, 200) s",
        ],
    )
    with (
        s3_server(settings, tmp_path) as s3,
        standalone_cluster(settings, tmp_path / "spark") as master,
    ):
        lake = f"s3a://{s3.bucket}/lake"
        env = {
            **p.env,
            **s3.env(),
            "CHANGELAKE_LAKE": lake,
            "CHANGELAKE_CHECKPOINTS": f"s3a://{s3.bucket}/checkpoints",
            "SPARK_LOCAL_IP": "127.0.0.1",  # the driver's ports on loopback too
        }
        # The snapshot on the suite's warm local session (a minute less than on a cold cluster),
        # into the same bucket; the changes on the cluster, resuming from the checkpoints there.
        read_bucket(p.spark, settings, s3)
        p.run_once(env_extra=env)
        p.sql(f"UPDATE public.{table} SET qty = qty + 1, price = price * 2 WHERE site = 1")
        p.sql(f"DELETE FROM public.{table} WHERE site = 2")
        p.sql(f"INSERT INTO public.{table} VALUES (7, 'new', 1, 0.01)")
        p.sql(f"UPDATE public.{table} SET site = 8 WHERE site = 3 AND sku = 'sku3'")  # a key
        p.caught_up()
        run = changelake("run", "--once", "--master", master, env=env).stdout
        assert f"(Spark {master})" in run and "done: 1 batches" in run, run

        # Its tasks ran in executors the worker started.
        assert len(list((tmp_path / "spark" / "work").glob("app-*"))) == 1
        # Everything is in the bucket: the table and the checkpoints.
        where = s3.root / s3.bucket
        assert (where / "lake" / p.prefix / "public" / table / "_delta_log").is_dir()
        assert (where / "checkpoints").is_dir()
        assert not (p.home / "lake").exists() and not (p.home / "checkpoints").exists()
        rows = assert_same(
            p.spark, p.dsn, f"public.{table}", f"{lake}/{p.prefix}/public/{table}", ["site", "sku"]
        )
        assert rows == 200 - 40 + 1
        # `status` reads the bucket without Spark (delta-rs), with the same S3 settings.
        shown = json.loads(changelake("status", "--json", env=env, check=False).stdout)
        assert (shown["tables"][table]["rows"], shown["tables"][table]["lag_changes"]) == (rows, 0)
