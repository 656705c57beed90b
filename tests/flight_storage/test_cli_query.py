"""``flight-select query``: the records S3 Select would return, errors with their S3 code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SAMPLES


def _query(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "flight_storage", "query", *args],
                          capture_output=True, cwd=ROOT, input=stdin, timeout=120)


def test_query_csv_with_header_to_json(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("id,name\n1,ann\n2,bob\n3,cid\n")
    done = _query(str(path), "--input-serialization", '{"CSV": {"FileHeaderInfo": "USE"}}',
                  "--output-serialization", '{"JSON": {}}', "--flavor", "aws",
                  "--expression", "SELECT name FROM s3object WHERE CAST(id AS INT) >= 2")
    assert done.returncode == 0, done.stderr
    assert done.stdout == b'{"name":"bob"}\n{"name":"cid"}\n'


def test_query_reads_stdin_and_scan_range() -> None:
    data = b"1,a\n22,b\n333,c\n"
    done = _query("-", "--scan-range", "2:6", "-e", "select _2 from s3object", stdin=data)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"b\n"  # only the record starting inside bytes 2..6


def test_query_compressed_sample_by_suffix() -> None:
    args = (str(SAMPLES / "sales/compressed/orders-2024-01.csv.gz"),
            "--input-serialization", '{"CSV": {"FileHeaderInfo": "USE"}}',
            "-e", "select count(*) from s3object")
    done = _query(*args, "--flavor", "ceph")
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"2000"  # Ceph prints an aggregate row without a newline
    done = _query(*args)  # the default, AWS, ends every record
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"2000\n"


def test_syntax_error_goes_to_stderr_with_code_and_position(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("1\n")
    done = _query(str(path), "-e", "select _1\nfrom s3object where")
    assert done.returncode != 0
    assert done.stdout == b""
    err = done.stderr.decode()
    assert err.startswith("Parse") or err.startswith("UnsupportedSyntax"), err
    assert "line 2" in err
    assert "Traceback" not in err


def test_cast_error_names_code(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("12a\n")
    done = _query(str(path), "-e", "select cast(_1 as int) from s3object")
    assert done.returncode != 0
    assert "CastFailed" in done.stderr.decode()


def test_missing_file_is_no_such_key(tmp_path: Path) -> None:
    done = _query(str(tmp_path / "nope.csv"), "-e", "select * from s3object")
    assert done.returncode != 0
    assert done.stderr.decode().startswith("NoSuchKey")


def test_a_directory_is_refused_without_a_traceback(tmp_path: Path) -> None:
    result = _query(str(tmp_path), "--expression", "select * from s3object")
    assert result.returncode == 2
    assert b"is a directory" in result.stderr and b"Traceback" not in result.stderr


def test_a_busy_port_is_reported_without_a_traceback(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "flight_storage", "serve", "--data", str(tmp_path),
             "--port", str(port)], capture_output=True, timeout=60)
    assert result.returncode == 2
    assert b"could not listen" in result.stderr and b"Traceback" not in result.stderr


def test_every_subcommand_help_shows_its_defaults() -> None:
    for command in ("serve", "query"):
        result = subprocess.run([sys.executable, "-m", "flight_storage", command, "--help"],
                                capture_output=True, timeout=60, check=True)
        assert b"(default:" in result.stdout
