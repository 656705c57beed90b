"""The S3 door with the tools people use (issue 27, item 4): the AWS CLI (``s3 ls``, ``cp``
of a file large enough for a multipart upload, ``sync``, ``rm --recursive``), pyarrow's
``S3FileSystem`` reading a Parquet object, s3fs/fsspec (in its own venv: its aiobotocore pins
an older botocore than the project's), and rclone where Debian's package is installed
(``scripts/setup.sh`` installs it)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from tests.conftest import SAMPLES
from tests.flight_storage.test_s3_door import ORDERS_KEY, start_door

ROOT = Path(__file__).resolve().parents[2]
AWS = Path(sys.executable).with_name("aws")
S3FS_PYTHON = ROOT / ".venv-s3fs" / "bin" / "python"
S3FS_CLIENT = Path(__file__).resolve().parent / "clients" / "s3fs_client.py"
MIB = 1 << 20


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    data = tmp_path_factory.mktemp("tools") / "data"
    shutil.copytree(SAMPLES / "sales", data / "sales")
    (data / "work").mkdir()
    server, url = start_door(data, "--s3-writable")
    yield data, url
    server.stop()


def _aws(url: str, *arguments: str) -> str:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    done = subprocess.run([str(AWS), "--endpoint-url", url, *arguments], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")}


def test_aws_cli_ls_cp_sync_rm(door: tuple[Path, str], tmp_path: Path) -> None:
    data, url = door
    listed = _aws(url, "s3", "ls", "s3://sales/orders/")
    assert sorted(line.split()[-1] for line in listed.splitlines()) == sorted(
        p.name for p in (data / "sales" / "orders").iterdir())
    assert "sales" in _aws(url, "s3", "ls")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(20 * MIB))  # past the CLI's 8 MiB threshold: multipart
    _aws(url, "s3", "cp", str(big), "s3://work/big.bin")
    assert (data / "work" / "big.bin").read_bytes() == big.read_bytes()
    back = tmp_path / "back.bin"
    _aws(url, "s3", "cp", "s3://work/big.bin", str(back))
    assert back.read_bytes() == big.read_bytes()
    _aws(url, "s3", "cp", f"s3://sales/{ORDERS_KEY}", "s3://work/copied/orders.csv")
    assert (data / "work" / "copied" / "orders.csv").read_bytes() == \
        (data / "sales" / ORDERS_KEY).read_bytes()
    local = tmp_path / "local"
    _aws(url, "s3", "sync", "s3://sales", str(local))
    assert _tree(local) == _tree(data / "sales")
    (local / "orders" / "extra.csv").write_text("a,b\n")
    # S3's LastModified has whole seconds (as the door's): a file written in the second of
    # its upload looks newer than its copy to the CLI, and sync sends it again. Date it back.
    written = time.time() - 10
    os.utime(local / "orders" / "extra.csv", (written, written))
    _aws(url, "s3", "sync", str(local), "s3://work/synced")
    assert _tree(data / "work" / "synced") == _tree(local)
    again = _aws(url, "s3", "sync", str(local), "s3://work/synced")
    assert "upload:" not in again  # nothing changed: nothing sent
    _aws(url, "s3", "rm", "--recursive", "s3://work/synced")
    assert not (data / "work" / "synced").exists()
    assert "synced" not in _aws(url, "s3", "ls", "s3://work/")


def test_pyarrow_s3_filesystem_reads_parquet(door: tuple[Path, str]) -> None:
    data, url = door
    parts = urlsplit(url)
    s3 = fs.S3FileSystem(endpoint_override=parts.netloc, scheme="http", access_key="x",
                         secret_key="y", region="us-east-1")
    table = pq.read_table("sales/parquet/orders.parquet", filesystem=s3)
    assert table.equals(pq.read_table(data / "sales" / "parquet" / "orders.parquet"))
    infos = s3.get_file_info(fs.FileSelector("sales/orders", recursive=True))
    assert sorted(i.base_name for i in infos) == sorted(
        p.name for p in (data / "sales" / "orders").iterdir())
    with s3.open_output_stream("work/from-pyarrow.parquet") as out:
        pq.write_table(table, out)
    assert pq.read_table(data / "work" / "from-pyarrow.parquet").equals(table)


def test_s3fs(door: tuple[Path, str]) -> None:
    data, url = door
    if not S3FS_PYTHON.exists():
        pytest.fail(f"{S3FS_PYTHON} is missing: run scripts/setup.sh (s3fs's aiobotocore "
                    "pins an older botocore than .venv's, so it has a venv of its own)")
    done = subprocess.run([str(S3FS_PYTHON), str(S3FS_CLIENT), url], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["ls"] == " ".join(sorted(f"sales/orders/{p.name}"
                                          for p in (data / "sales" / "orders").iterdir()))
    assert lines["cat"] == hashlib.sha256((data / "sales" / ORDERS_KEY).read_bytes()
                                          ).hexdigest()
    assert (data / "work" / "s3fs" / "big.bin").stat().st_size == int(lines["put"])
    assert not (data / "work" / "s3fs" / "gone.txt").exists()


def test_rclone(door: tuple[Path, str], tmp_path: Path) -> None:
    data, url = door
    rclone = shutil.which("rclone")
    if rclone is None:
        pytest.fail("rclone is missing: run scripts/setup.sh (apt-get install rclone)")
    env = {**{k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"},  # http: no CA
           "RCLONE_CONFIG": os.devnull,
           "RCLONE_CONFIG_DOOR_TYPE": "s3", "RCLONE_CONFIG_DOOR_PROVIDER": "Other",
           "RCLONE_CONFIG_DOOR_ENDPOINT": url, "RCLONE_CONFIG_DOOR_ACCESS_KEY_ID": "x",
           "RCLONE_CONFIG_DOOR_SECRET_ACCESS_KEY": "y", "RCLONE_CONFIG_DOOR_REGION": "us-east-1",
           "RCLONE_CONFIG_DOOR_FORCE_PATH_STYLE": "true"}

    def run(*arguments: str) -> str:
        done = subprocess.run([rclone, *arguments], env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert sorted(run("lsf", "door:sales/orders").split()) == sorted(
        p.name for p in (data / "sales" / "orders").iterdir())
    local = tmp_path / "copy"
    run("copy", "door:sales", str(local))
    assert _tree(local) == _tree(data / "sales")
    big = tmp_path / "up" / "big.bin"
    big.parent.mkdir()
    big.write_bytes(os.urandom(12 * MIB))
    run("copy", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M", str(big.parent),
        "door:work/rclone")
    assert (data / "work" / "rclone" / "big.bin").read_bytes() == big.read_bytes()
    run("check", str(big.parent), "door:work/rclone")
    run("purge", "door:work/rclone")
    assert not (data / "work" / "rclone").exists()
