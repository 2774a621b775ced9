"""One Spark session for the pipeline, sized for a small machine and fed local jars.

The Delta and Kafka jars come from vendor/spark (fetched by `mvn`, see pom.xml); nothing is
downloaded when Spark starts. Jars the pyspark wheel already ships are left out, so the classpath
holds one copy of each library (the wheel's), not two versions fighting.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from changelake import kafka_security
from changelake.exceptions import ConfigError
from changelake.settings import Settings

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

PACKAGE_LOG4J = Path(__file__).resolve().parent / "log4j2.properties"
PACKAGE_POOLS = Path(__file__).resolve().parent / "fairscheduler.xml"
FETCH_MAX_WAIT_MS = 10  # see kafka_options
# Compiled code classes kept (Spark's default 100). The shop's round of four tables under load
# loaded ~1,800 classes before the count stopped growing; a class is tens of KB of metaspace.
CODEGEN_CACHE_ENTRIES = 2000
# The driver JVM collects with the parallel collector: on two cores G1's concurrent threads take
# CPU from the work itself. `run --once` over ~12k changes, runs interleaved: queryable in 24.5
# and 22.0 s against 26.0 and 25.7 s with G1, exited (its compaction done) in 46.3 and 45.0 s
# against 52.3 and 52.8 s. Compiling with C1 alone (-XX:TieredStopAtLevel=1) cut a further
# ~2 s there, but made `make bench`'s 2M-row snapshot 41% slower (99 s against 70 s).
# And in UTC, whatever the machine's zone: delta-spark checks the file list it keeps in a
# version's checksum file against a Spark job rebuilding the table's state at every commit when
# the JVM's zone is not UTC (`allFilesInCrc.verificationMode.forceOnNonUTC`), the job that
# merge-on-write reads that file to avoid. Spark's SQL already runs in UTC (session.timeZone).
DRIVER_JVM_FLAGS = "-XX:+UseParallelGC -Duser.timezone=UTC"
_VERSIONED_JAR = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


# delta-spark lists a table's files (with their statistics) in each version's checksum file when
# it has fewer than this many (its default: 50); merge-on-write reads them there rather than by a
# Spark job over the table's state (2 s for a 1M-row table: sinks/delta_jvm.py). The list costs
# every commit of such a table: measured here, an append to a table of 900 files took 0.81 s
# with it against 0.64 s without, so it stops at a few hundred files.
FILES_IN_CHECKSUM = 200


def artifact_name(jar: str) -> str:
    """`jackson-core-2.13.5.jar` → `jackson-core`, `zstd-jni-1.5.7-3.jar` → `zstd-jni`: the name
    ends before the first dash followed by a digit."""
    match = _VERSIONED_JAR.match(jar)
    return match.group("artifact") if match else jar.removesuffix(".jar")


def extra_jars(vendor_spark: Path, bundled: Path) -> list[Path]:
    """The vendor jars pyspark does not already bundle (by artifact name, any version)."""
    if not vendor_spark.is_dir():
        raise ConfigError(
            f"the Spark extras (Delta, Kafka source) are missing from {vendor_spark}",
            "run `make setup` (it fetches them with mvn from pom.xml)",
        )
    have = {artifact_name(j.name) for j in bundled.glob("*.jar")}
    return sorted(j for j in vendor_spark.glob("*.jar") if artifact_name(j.name) not in have)


def _bundled_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def session(
    settings: Settings,
    app: str = "changelake",
    ui: bool = False,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The pipeline's Spark session (get-or-create: one per process). `conf`: more settings,
    such as serving Spark Connect (they count only for a session this call creates)."""
    from pyspark.sql import SparkSession

    from changelake.jvm_lookups import remember_lookups

    os.environ.setdefault("JAVA_HOME", str(settings.java_home))
    # Python workers run this interpreter, with its packages (pyarrow): not whatever `python3` is
    # first on the PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if settings.spark_master.startswith("local"):
        # The driver's ports stay on loopback, like every other local service.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = extra_jars(settings.vendor / "spark", _bundled_jars())
    builder = (
        SparkSession.builder.appName(app)
        .master(settings.spark_master)
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.driver.memory", settings.spark_driver_memory)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        # Two cores: a handful of shuffle partitions, not 200 mostly empty tasks per MERGE.
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        # VACUUM lists a table's folders by a job of this many tasks each (default 10,000,
        # mostly empty): `maintain` of a 2-row table took 138 s for its dry run, 7 s with 8.
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        .config("spark.databricks.delta.merge.repartitionBeforeWrite.enabled", "false")
        .config("spark.databricks.delta.schema.autoMerge.enabled", "false")
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile=file:{PACKAGE_LOG4J} -Dlog4j2.statusLoggerLevel=ERROR"
            f" {DRIVER_JVM_FLAGS}",
        )
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.scheduler.allocation.file", f"file:{PACKAGE_POOLS}")
        # Delta rebuilds a table's state with this many tasks (default 50): a few suffice here.
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.databricks.delta.allFilesInCrc.thresholdNumFiles", str(FILES_IN_CHECKSUM))
        # Compiled query code is cached by its text, 100 classes by default: a round of four
        # tables' batches needs more, so the cache evicted each class before its next use and
        # every batch compiled its code again, then had the JIT compile the new classes (about
        # 80 classes a second, a quarter of the JVM's CPU under load; see CODEGEN_CACHE_ENTRIES).
        .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))
        # PySpark's DataFrame debugging records the Python call site of every API call in the
        # JVM: about ten py4j round trips each (one resolves `SparkSession` by its bare name,
        # failing through every imported package and searching every jar for each), 1.3 ms per
        # F.col against 0.4 ms without, and a table's batch makes hundreds of such calls on the
        # driver's two shared cores. It only adds that call site to an error's text.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    for name, value in {**s3a_conf(settings, os.environ), **(conf or {})}.items():
        builder = builder.config(name, value)
    with _group_signals_left_to_python():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    remember_lookups(jvm)
    return spark


def s3a_conf(settings: Settings, env: Mapping[str, str]) -> dict[str, str]:
    """Hadoop's S3A settings for an s3a:// lake. An S3-compatible server is reached by its URL
    with path-style addressing (its buckets are not DNS names); the keys go in the session's
    Hadoop configuration, which every executor receives, rather than being left to each
    executor's own environment, which on a cluster is the worker's, not ours."""
    conf: dict[str, str] = {}
    if settings.s3_region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = settings.s3_region
    if endpoint := settings.s3_endpoint:
        # A server of one's own has one region, which request signing must name.
        conf.setdefault("spark.hadoop.fs.s3a.endpoint.region", "us-east-1")
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = (
            "true" if endpoint.startswith("https:") else "false"
        )
    for name, variables in S3_KEY_VARIABLES.items():
        if value := next((env[v] for v in variables if env.get(v)), None):
            conf[f"spark.hadoop.fs.s3a.{name}"] = value
    return conf


# S3A's key settings ← the environment: changelake's own names first (they can sit in a compose
# .env, which the host CLI reads too), then the names every AWS client reads.
S3_KEY_VARIABLES = {
    "access.key": ("CHANGELAKE_S3_ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
    "secret.key": ("CHANGELAKE_S3_SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
}


@contextmanager
def _group_signals_left_to_python() -> Iterator[None]:
    """The JVM pyspark starts here inherits SIGTERM ignored, as pyspark already has it inherit
    SIGINT: a stop sent to the whole process group (systemd's default, `kill -- -PGID`) then
    reaches only this process, which ends the batch in flight and then stops the JVM itself,
    instead of the JVM dying under the batch. The JVM still exits when this process dies: its
    gateway watches our pipe."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may change handlers: a JVM started here keeps SIGTERM
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def owned_session(
    settings: Settings,
    app: str = "changelake",
    ui: bool = False,
    conf: Mapping[str, str] | None = None,
) -> Iterator[SparkSession]:
    """A command's session, stopped when the command ends, unless the caller already had one
    (a notebook, the test suite): that session is theirs to stop, and stays usable."""
    from pyspark.sql import SparkSession

    had = SparkSession.getActiveSession() is not None
    spark = session(settings, app, ui, conf)
    try:
        yield spark
    finally:
        if not had:
            spark.stop()


def kept(df: DataFrame) -> DataFrame:
    """`df` computed now and held (in memory, spilling to disk) under a plan that reads no
    table, for a frame read several times while the pipeline writes the tables it reads.

    Not `persist()`: whenever anything writes a table, Spark re-plans every cached frame that
    reads it, in the writing thread (a write's `CacheManager.recacheByPlan`), and Delta plans a
    scan by listing the table's files in Spark jobs. The aggregate views' cached frames cost
    the stream's history appends 12-46 s of such jobs in some batches under the demo's load.
    `release` frees it."""
    return df.localCheckpoint(eager=True)


def release(df: DataFrame) -> None:
    """Free what `kept` holds (the frame is unreadable after). A frame never released is freed
    once the JVM collects it."""
    with contextlib.suppress(Exception):  # released already, or the session is gone
        df._jdf.queryExecution().logical().rdd().unpersist(False)


@contextmanager
def held(df: DataFrame, reads_tables: bool) -> Iterator[DataFrame]:
    """`df` computed once for the block and freed after it: cached, or `kept` when it reads a
    table the block writes (`reads_tables`), where a cached frame would be planned again."""
    frame = kept(df) if reads_tables else df.persist()
    try:
        yield frame
    finally:
        release(frame) if reads_tables else frame.unpersist()


@contextmanager
def job_group(context: SparkContext, desc: str) -> Iterator[str]:
    """The Spark jobs this thread starts inside the block run in a job group of their own (its
    id is yielded: `statusTracker().getJobIdsForGroup` finds them; Spark's UI shows `desc`);
    the thread's previous group is restored afterwards."""
    group = f"changelake-{threading.get_ident()}-{uuid.uuid4().hex[:12]}"
    previous = context.getLocalProperty("spark.jobGroup.id")
    context.setJobGroup(group, desc)
    try:
        yield group
    finally:
        context.setLocalProperty("spark.jobGroup.id", previous)  # type: ignore[arg-type]
        context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def kafka_options(spark: SparkSession, bootstrap: str, topics: list[str]) -> dict[str, str]:
    """How the pipeline reads tables' topics: one in a snapshot, a connector's in its stream."""
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": ",".join(topics),
        "failOnDataLoss": "false",  # compaction leaves gaps in the offsets
        # A table's topic has one partition, which Spark would read as one task on one core:
        # split its offset range so decoding a snapshot or a long catch-up uses every core.
        # Order never depends on it: changes are ordered by LSN, partition and offset.
        "minPartitions": str(spark.sparkContext.defaultParallelism),
        # A task reads a closed offset range, so its consumer's fetch ahead at the range's end
        # finds nothing new, and the broker holds it for fetch.max.wait.ms (500 ms by default)
        # before the task can end: measured here, four 600-record ranges took 1.3 s to count,
        # 0.3 s with 10 ms. Nothing polls an open end, so a short wait costs no busy fetching.
        "kafka.fetch.max.wait.ms": str(FETCH_MAX_WAIT_MS),
        **kafka_security.from_env().spark(),
    }
