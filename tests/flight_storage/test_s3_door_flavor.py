"""The S3 door's default flavour (``--s3-flavor``), as a user of the AWS CLI meets it.

The AWS CLI cannot send the ``x-flight-select-flavor`` header, so what the door answers by
default is what its users get: AWS's rules (LIMIT counts result rows, RFC 4180 quoting of CSV
output, JSON output that parses). ``--s3-flavor ceph`` gives Ceph RGW's answers to those who
stand the door in for RGW, and the header still chooses per request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flight_storage.execution.select_local import run_select
from flight_storage.protocol import FLAVOR_HEADER
from select_dialect.flavors import FLAVOR_NAMES
from tests.conftest import ServerProcess
from tests.flight_storage.test_s3_door import s3_client, start_door

CSV = (b'id,name,note\n1,"Smith, John","said ""hi"""\n2,plain,x\n3,c,y\n4,d,z\n5,e,w\n'
       b"6,f,v\n")
USE = {"CSV": {"FileHeaderInfo": "USE"}}
AWS_CLI = Path(sys.executable).with_name("aws")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flavor")
    (root / "people").mkdir()
    (root / "people" / "people.csv").write_bytes(CSV)
    return root


@pytest.fixture(scope="module")
def door(data: Path) -> Iterator[str]:
    server: ServerProcess
    server, url = start_door(data)
    yield url
    server.stop()


def _cli(url: str, expression: str, output: dict[str, Any], tmp_path: Path) -> bytes:
    out = tmp_path / "out"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    subprocess.run(
        [str(AWS_CLI), "s3api", "select-object-content", "--endpoint-url", url,
         "--bucket", "people", "--key", "people.csv", "--expression", expression,
         "--expression-type", "SQL", "--input-serialization", json.dumps(USE),
         "--output-serialization", json.dumps(output), str(out)],
        check=True, env=env, capture_output=True, timeout=120)
    return out.read_bytes()


def test_limit_counts_result_rows(door: str, tmp_path: Path) -> None:
    answer = _cli(door, "SELECT s.id FROM s3object s WHERE CAST(s.id AS INT) > 2 LIMIT 3",
                  {"CSV": {}}, tmp_path)
    assert answer == b"3\n4\n5\n"


def test_csv_output_quotes_as_s3(door: str, tmp_path: Path) -> None:
    answer = _cli(door, "SELECT s.name, s.note FROM s3object s WHERE s.id = '1'", {"CSV": {}},
                  tmp_path)
    assert answer == b'"Smith, John","said ""hi"""\n'
    always = _cli(door, "SELECT s.id, s.name FROM s3object s WHERE s.id = '2'",
                  {"CSV": {"QuoteFields": "ALWAYS"}}, tmp_path)
    assert always == b'"2","plain"\n'


def test_json_output_parses(door: str, tmp_path: Path) -> None:
    answer = _cli(door, "SELECT s.name, s.note FROM s3object s", {"JSON": {}}, tmp_path)
    rows = [json.loads(line) for line in answer.decode().splitlines()]
    assert rows[0] == {"name": "Smith, John", "note": 'said "hi"'}
    assert len(rows) == 6


def test_ceph_flavour_by_server_option(data: Path, tmp_path: Path) -> None:
    server, url = start_door(data, "--s3-flavor", "ceph")
    try:
        for expression, output in [
            ("SELECT s.name, s.note FROM s3object s WHERE s.id = '1'", {"CSV": {}}),
            ("SELECT s.name, s.note FROM s3object s", {"JSON": {}}),
            ("SELECT s.id FROM s3object s WHERE CAST(s.id AS INT) > 2 LIMIT 3", {"CSV": {}}),
        ]:
            ceph = run_select(CSV, expression, input_serialization=USE,
                              output_serialization=output, flavor="ceph").records
            assert _cli(url, expression, output, tmp_path) == ceph
        assert ceph == b"3\n"  # Ceph's LIMIT counts the records it scanned
    finally:
        server.stop()


def test_the_flavour_header_still_chooses(door: str) -> None:
    s3 = s3_client(door)
    s3.meta.events.register(
        "before-sign.s3.SelectObjectContent",
        lambda request, **_: request.headers.__setitem__(FLAVOR_HEADER, "ceph"))
    answer = s3.select_object_content(
        Bucket="people", Key="people.csv", ExpressionType="SQL",
        Expression="SELECT s.name FROM s3object s WHERE s.id = '1'",
        InputSerialization=USE, OutputSerialization={"CSV": {}})
    records = b"".join(e["Records"]["Payload"] for e in answer["Payload"] if "Records" in e)
    assert records == b"Smith, John\n"  # Ceph prints it unquoted


def test_serve_help_names_the_option() -> None:
    done = subprocess.run([sys.executable, "-m", "flight_storage", "serve", "--help"],
                          capture_output=True, text=True, timeout=60, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    text = " ".join(done.stdout.split())
    choices = ",".join(FLAVOR_NAMES)  # every flavour record, in the record order
    option = text[text.rindex(f"--s3-flavor {{{choices}}}"):]  # the option, not usage
    following = option.find(" --", 2)
    assert option[:following if following > 0 else None].endswith("(default: aws)")
