"""A Spark standalone cluster, one master and one worker, started from the pyspark wheel's own
`bin/spark-class` and bound to loopback: the pipeline's `--master spark://…` on a real cluster
manager, whose executors are processes of their own (not threads in the driver's JVM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pyspark

from changelake.settings import Settings
from tests.support import free_port, wait_for

HOST = "127.0.0.1"


def _alive_workers(ui_port: int) -> int:
    """How many workers the master counts as ALIVE (its web UI's JSON)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{ui_port}/json/", timeout=2) as response:
            doc = json.load(response)
    except (OSError, ValueError):  # not up, or its UI still answering with its HTML page
        return 0
    return sum(1 for worker in doc.get("workers", []) if worker.get("state") == "ALIVE")


@contextmanager
def standalone_cluster(settings: Settings, folder: Path) -> Iterator[str]:
    """Yield the master's URL once its worker has registered; both are stopped afterwards.
    Their logs (and the executors', under work/) are in `folder`."""
    spark_home = Path(pyspark.__file__).resolve().parent
    master_port, master_ui, worker_ui = free_port(HOST), free_port(HOST), free_port(HOST)
    url = f"spark://{HOST}:{master_port}"
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "JAVA_HOME": str(settings.java_home),
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": sys.executable,
    }
    daemons = {
        "master": ["org.apache.spark.deploy.master.Master", "--host", HOST,
                   "--port", str(master_port), "--webui-port", str(master_ui)],
        "worker": ["org.apache.spark.deploy.worker.Worker", url, "--host", HOST,
                   "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui),
                   "--work-dir", str(folder / "work")],
    }  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        for name, args in daemons.items():
            log = stack.enter_context((folder / f"{name}.log").open("w"))
            daemon = subprocess.Popen(
                [str(spark_home / "bin" / "spark-class"), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: stopped with its executors below
            )
            stack.callback(_stop, daemon)
        wait_for(lambda: _alive_workers(master_ui) == 1, 90, f"a worker registered at {url}")
        yield url


def _stop(daemon: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(daemon.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        daemon.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()
