"""Ceph's s3select engine as a benchmark peer, through the example program of its repository.

Ceph's engine (github.com/ceph/s3select) is a header-only C++ library with no Python binding
and no package in Debian or PyPI, so the peers benchmark drives the command-line example that
ships with it (``example/s3select_example.cpp``) as a subprocess. Nothing of Ceph's code is in
this project: the program is built beside it (see docs/benchmarks.md) and named by the
environment variable :data:`ENV_VAR`; without it the Ceph column reads "not measured".

The example is run as ``s3select_example -key <file> -q "<s3-select text>"``: that mode reads
the object in 4 MiB chunks and hands each to the same ``csv_object`` handler Ceph's RGW uses
(one parse of the query, results framed per chunk), and it takes the statement unchanged
(``FROM s3object``, headerless ``_N`` columns, Ceph's default CSV rules). It prints each
chunk's records between ``<Payload>``/``<Records>`` marker lines; :func:`parse_output` keeps
the records. Hand-written because the format is the example's own, not a documented one.
"""

from __future__ import annotations

import csv
import math
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "FLIGHT_SELECT_CEPH_S3SELECT"
"""Names the built ``s3select_example`` binary of github.com/ceph/s3select."""

NOT_MEASURED = (f"not measured: {ENV_VAR} does not name Ceph's s3select example program "
                "(built from github.com/ceph/s3select, see docs/benchmarks.md)")

MARKER_LINES = frozenset({"<Payload>", "<Records>"})
"""Lines the example prints around each chunk's records (empty lines separate chunks)."""

ANSWER_REL_TOL = 1e-9
"""Numbers agree within this relative tolerance: float sums differ in their last digits when
the additions happen in another order (Ceph row by row, DataFusion per partition)."""

Row = tuple[str, ...]


class CephError(RuntimeError):
    """The example program failed or refused the query (its own message is kept)."""


@dataclass(frozen=True)
class CephS3Select:
    """The ``s3select_example`` program of github.com/ceph/s3select.

    Attributes:
        binary: path of the executable.
    """

    binary: Path

    @classmethod
    def from_env(cls) -> CephS3Select | None:
        """The program :data:`ENV_VAR` names, None when it is unset or empty.

        Raises:
            CephError: the variable names no executable file (a typo should not read as
                "not measured").
        """
        value = os.environ.get(ENV_VAR, "").strip()
        if not value:
            return None
        binary = Path(value).expanduser()
        if not binary.is_file() or not os.access(binary, os.X_OK):
            raise CephError(f"{ENV_VAR}={value!r} is not an executable file")
        return cls(binary)

    def run(self, statement: str, path: Path) -> list[Row]:
        """Run ``statement`` (``FROM s3object``) over the CSV ``path``; the records it prints.

        Raises:
            CephError: non-zero exit, or an error message instead of records.
        """
        done = subprocess.run([str(self.binary), "-key", str(path), "-q", statement],
                              capture_output=True, text=True, check=False)
        # The example prints parse and execution errors on stdout and may still exit 0 after
        # a non-fatal engine exception, so both the status and the text are checked.
        failed = done.returncode != 0 or any(
            line.startswith(("failed to parse", "failure on execution"))
            for line in done.stdout.splitlines())
        if failed:
            message = (done.stdout + done.stderr).strip().replace("\n", " ")
            raise CephError(f"exit {done.returncode}: {message[-300:]}")
        return parse_output(done.stdout)


def parse_output(text: str) -> list[Row]:
    """The CSV records of the example's output, without its marker and separator lines.

    A record that is the empty string (one empty column) is indistinguishable from a
    separator and is dropped; none of the peer queries can produce one.
    """
    lines = [line for line in text.splitlines() if line and line not in MARKER_LINES]
    return [tuple(record) for record in csv.reader(lines)]


def answers_agree(ceph: Sequence[Row], ours: Sequence[Row]) -> bool:
    """True when both give the same records, in any order; numbers within
    :data:`ANSWER_REL_TOL`, other values as text."""
    if len(ceph) != len(ours):
        return False
    return all(len(a) == len(b) and all(_cells_agree(x, y) for x, y in zip(a, b, strict=True))
               for a, b in zip(sorted(ceph), sorted(ours), strict=True))


def _cells_agree(left: str, right: str) -> bool:
    try:
        return math.isclose(float(left), float(right), rel_tol=ANSWER_REL_TOL)
    except ValueError:
        return left == right
