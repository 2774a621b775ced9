"""A real S3-compatible server for the tests: Versity's S3 gateway (built by `make setup`) serving
a local folder on loopback, with one bucket and keys of its own."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from changelake.settings import Settings
from changelake.stack.install import S3_SERVER
from tests.support import wait_for

HOST = "127.0.0.1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str
    root: Path  # the folder behind it: each bucket a directory, each object a file

    def env(self) -> dict[str, str]:
        """What a changelake command needs to reach it."""
        return {
            "CHANGELAKE_S3_ENDPOINT": self.endpoint,
            "CHANGELAKE_S3_ACCESS_KEY": self.access_key,
            "CHANGELAKE_S3_SECRET_KEY": self.secret_key,
        }


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((HOST, port)) == 0


@contextmanager
def s3_server(settings: Settings, folder: Path, bucket: str = "changelake") -> Iterator[S3Server]:
    binary = settings.vendor / S3_SERVER
    assert binary.exists(), f"{binary} is missing: `make setup` builds it (it needs Go)"
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = int(sock.getsockname()[1])
    root = folder / "s3"
    (root / bucket).mkdir(parents=True)  # a top-level directory is a bucket
    server = S3Server(f"http://{HOST}:{port}", bucket, "changelake", secrets.token_hex(16), root)
    env = {
        **os.environ,
        "ROOT_ACCESS_KEY_ID": server.access_key,
        "ROOT_SECRET_ACCESS_KEY": server.secret_key,
    }
    with (folder / "s3.log").open("w") as log:
        process = subprocess.Popen(
            [str(binary), "--port", f"{HOST}:{port}", "--quiet", "posix", str(root)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: _listening(port) or process.poll() is not None, 30, "the S3 server")
            assert process.poll() is None, (folder / "s3.log").read_text()
            yield server
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
