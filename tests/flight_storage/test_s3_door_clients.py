"""S3 clients we did not write, against the S3 door: awswrangler and the minio client.

awswrangler's ``s3.select_query`` splits an object into parallel 1 MiB ScanRanges; its answer
must equal reading the whole file. awswrangler's releases pin ``pyarrow<26``, which the server
needs, so it lives in its own venv (``.venv-clients/``, made by ``scripts/setup.sh`` from
``clients/requirements.txt``) and runs ``clients/awswrangler_select.py`` in a subprocess that
talks HTTP to the door, as any foreign client does. The minio client parses the event stream
(CRCs included) with its own code.
"""
from __future__ import annotations

import csv
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd
import pytest

from flight_storage.protocol import FLAVOR_HEADER
from tests.conftest import ServerProcess
from tests.flight_storage.test_s3_door import start_door

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = ROOT / ".venv-clients" / "bin" / "python"
AWSWRANGLER_SELECT = Path(__file__).resolve().parent / "clients" / "awswrangler_select.py"
ROWS = 150_000  # about 3 MB: awswrangler cuts it into three 1 MiB ScanRanges


@pytest.fixture(scope="module")
def big_object(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    data = tmp_path_factory.mktemp("clients")
    (data / "big").mkdir()
    lines = ["id,name,amount", *(f"{i},name {i % 97},{i * 7 % 1000}.{i % 100:02d}"
                                 for i in range(ROWS))]
    path = data / "big" / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    server: ServerProcess
    server, url = start_door(data)
    yield path, url
    server.stop()


def test_awswrangler_select_query_equals_the_whole_file(big_object: tuple[Path, str]) -> None:
    path, url = big_object
    assert path.stat().st_size > 2 * (1 << 20)
    if not CLIENTS_PYTHON.exists():
        pytest.fail(f"{CLIENTS_PYTHON} is missing: run scripts/setup.sh to create the clients' "
                    "venv (awswrangler pins pyarrow<26, so it cannot share .venv)")
    # awswrangler parses AWS's JSON records: the aws flavour (the door's default, named here
    # too, as a client that relies on a flavour should)
    done = subprocess.run(
        [str(CLIENTS_PYTHON), str(AWSWRANGLER_SELECT), url, f"s3://big/{path.name}",
         FLAVOR_HEADER, "aws"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    with path.open(newline="", encoding="utf-8") as handle:
        whole = list(csv.DictReader(handle))
    assert rows == whole


def test_minio_client_select(big_object: tuple[Path, str]) -> None:
    minio = pytest.importorskip("minio")
    from minio.select import CSVInputSerialization, CSVOutputSerialization, SelectRequest

    path, url = big_object
    client = minio.Minio(urlsplit(url).netloc, access_key="x", secret_key="y",
                         secure=False, region="us-east-1")
    request = SelectRequest("SELECT s.id FROM s3object s WHERE s.name = 'name 5'",
                            CSVInputSerialization(file_header_info="USE"),
                            CSVOutputSerialization(), request_progress=False)
    reader: Any = client.select_object_content("big", path.name, request)
    answer = b"".join(reader.stream())
    whole = pd.read_csv(path, dtype=str)
    expected = "".join(f"{i}\n" for i in whole.loc[whole["name"] == "name 5", "id"])
    assert answer.decode() == expected
    stats = reader.stats()  # minio keeps the XML text of the counts
    assert int(stats.bytes_scanned) == path.stat().st_size
    assert int(stats.bytes_returned) == len(answer)
