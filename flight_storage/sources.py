"""Where an object's bytes come from: a file under the data root, or bytes in memory."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol


class ObjectSource(Protocol):
    """Random-access bytes of one object."""

    name: str
    size: int

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
