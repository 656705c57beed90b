"""Where an object's bytes come from: a file under the data root, or bytes in memory.

Text readers stream with :meth:`open`; Parquet reads row groups at their offsets, possibly from
several threads at once, so it asks for :func:`random_access`, a file with positioned reads.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import pyarrow as pa


class ObjectSource(Protocol):
    """Random-access bytes of one object."""

    # Read-only members: the sources are frozen dataclasses, and nothing assigns these.
    @property
    def name(self) -> str:
        """The object's name (for messages)."""
        ...

    @property
    def size(self) -> int:
        """The object's length in bytes."""
        ...

    def open(self) -> BinaryIO:
        """A new binary stream positioned at 0 (the caller closes it)."""
        ...


@dataclass(frozen=True)
class FileSource:
    """An object stored as a file."""

    path: Path
    name: str
    size: int

    def open(self) -> BinaryIO:
        return open(self.path, "rb")

    def open_random_access(self) -> pa.NativeFile:
        """A file for positioned reads (several readers may share it safely)."""
        return pa.OSFile(str(self.path))


@dataclass(frozen=True)
class BytesSource:
    """An object held in memory (the local CLI reading stdin, tests, the conformance runner)."""

    data: bytes
    name: str = "<memory>"

    @property
    def size(self) -> int:
        return len(self.data)

    def open(self) -> BinaryIO:
        return io.BytesIO(self.data)

    def open_random_access(self) -> pa.NativeFile:
        """A file for positioned reads (several readers may share it safely)."""
        return pa.BufferReader(self.data)


def random_access(source: ObjectSource) -> pa.NativeFile:
    """A positioned-read file for ``source`` (falls back to reading it whole into memory)."""
    opener = getattr(source, "open_random_access", None)
    if opener is not None:
        return opener()
    with source.open() as stream:
        return pa.BufferReader(stream.read())


def local_path(source: ObjectSource) -> Path | None:
    """The file holding ``source``'s bytes, when it is one (DataFusion's readers need it)."""
    path = getattr(source, "path", None)
    return path if isinstance(path, Path) else None
