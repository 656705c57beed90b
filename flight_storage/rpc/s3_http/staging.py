"""Where multipart uploads wait for CompleteMultipartUpload: parts on disk, bounded.

One folder per upload under the staging root, holding ``upload.json`` (bucket, key, start,
user) and, per part, its bytes (``part-00001``) and what was learnt while they streamed
(``part-00001.json``: size, MD5 ETag, verified checksums). A part's file is renamed into place
only once its body is complete and checked, so a part is there whole or not at all, and no
byte of an upload is visible as an object before Complete hands the assembled file to the
bucket's store.

Bounds (:class:`~flight_storage.rpc.s3_http.door_config.S3DoorConfig`): the bytes of one
upload (``EntityTooLarge``), the bytes of every upload together and the number of uploads
(``SlowDown`` while full), counted as the bytes arrive, and an expiry after which an upload
and its parts are removed (found on the next call that looks: no thread of its own). A root
given by the operator is read back at start, so uploads survive a restart; without one, a
temporary folder of the process is used and removed when it stops.

Hand-written: the state is a few files per upload; no library keeps S3 multipart state.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO, Final

from flight_storage.rpc.s3_http.door_config import S3DoorConfig
from flight_storage.rpc.s3_http.s3_errors import S3HttpError

log = logging.getLogger(__name__)

MIN_PART_BYTES: Final = 5 << 20
"""S3's smallest part, but for the last (``EntityTooSmall`` at Complete)."""
MAX_PART_NUMBER: Final = 10_000
_UPLOAD_ID: Final = re.compile(r"[A-Za-z0-9_-]{16,64}")
_UPLOAD_FILE: Final = "upload.json"


@dataclass(frozen=True)
class Part:
    """One staged part."""

    number: int
    size: int
    md5: str
    """Hex MD5 of the part's bytes (its ETag, quoted, is what S3 answers)."""
    mtime_ns: int
    checksums: dict[str, str] = field(default_factory=dict)
    """``x-amz-checksum-<name>`` -> base64 value, for those the client sent and we checked."""

    @property
    def etag(self) -> str:
        return f'"{self.md5}"'


@dataclass
class Upload:
    """One multipart upload in progress."""

    upload_id: str
    bucket: str
    key: str
    initiated_ns: int
    user: str | None
    parts: dict[int, Part] = field(default_factory=dict)
    completing: bool = False

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts.values())


def multipart_etag(parts: list[Part]) -> str:
    """The ETag S3 gives an object made of ``parts``: the MD5 of their MD5s, ``-`` and
    their count."""
    digest = hashlib.md5(b"".join(bytes.fromhex(p.md5) for p in parts),
                         usedforsecurity=False).hexdigest()
    return f'"{digest}-{len(parts)}"'


class Staging:
    """The staging area of one door (thread-safe: handlers call it from worker threads).

    Args:
        config: the door's bounds and staging folder.
    """

    def __init__(self, config: S3DoorConfig) -> None:
        self.config = config
        self._temporary = config.staging_dir is None
        self.root = (Path(tempfile.mkdtemp(prefix="flight-select-uploads-"))
                     if config.staging_dir is None else config.staging_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._uploads: dict[str, Upload] = {}
        self._in_flight: dict[str, int] = {}
        """Bytes of parts still arriving, per upload."""
        self._load()

    # ------------------------------------------------------------------ state
    @property
    def staged_bytes(self) -> int:
        """Bytes on disk or arriving, every upload together."""
        with self._lock:
            return self._staged()

    def _staged(self) -> int:
        return sum(u.size for u in self._uploads.values()) + sum(self._in_flight.values())

    def _load(self) -> None:
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir()):
            try:
                about = json.loads((folder / _UPLOAD_FILE).read_text())
                upload = Upload(folder.name, about["bucket"], about["key"],
                                int(about["initiated_ns"]), about.get("user"))
            except (OSError, ValueError, KeyError, TypeError):
                log.warning("staging: %s is not an upload; removed", folder)
                shutil.rmtree(folder, ignore_errors=True)
                continue
            for sidecar in folder.glob("part-*.json"):
                data = folder / sidecar.stem
                try:
                    part = Part(**json.loads(sidecar.read_text()))
                    if data.stat().st_size == part.size:
                        upload.parts[part.number] = part
                except (OSError, ValueError, TypeError):
                    continue
            for temporary in folder.glob(".tmp-*"):
                temporary.unlink(missing_ok=True)
            self._uploads[upload.upload_id] = upload

    def close(self) -> None:
        """Remove a temporary staging root (a configured one keeps its uploads)."""
        if self._temporary:
            shutil.rmtree(self.root, ignore_errors=True)

    def _folder(self, upload_id: str) -> Path:
        return self.root / upload_id

    def _expired(self, upload: Upload, now: float) -> bool:
        return now - upload.initiated_ns / 1e9 > self.config.upload_expiry_s

    def _sweep(self) -> None:
        """Remove expired uploads (under the lock)."""
        now = time.time()
        for upload in [u for u in self._uploads.values()
                       if self._expired(u, now) and not u.completing]:
            log.info("staging: upload %s of %s/%s expired; removed", upload.upload_id,
                     upload.bucket, upload.key)
            self._drop(upload)

    def _drop(self, upload: Upload) -> None:
        self._uploads.pop(upload.upload_id, None)
        shutil.rmtree(self._folder(upload.upload_id), ignore_errors=True)

    # ------------------------------------------------------------------ uploads
    def create(self, bucket: str, key: str, user: str | None) -> Upload:
        """Start an upload.

        Raises:
            S3HttpError: ``SlowDown`` when ``max_uploads`` are in progress.
        """
        with self._lock:
            self._sweep()
            if len(self._uploads) >= self.config.max_uploads:
                raise S3HttpError("SlowDown", f"{self.config.max_uploads} multipart uploads "
                                  "are in progress (--s3-max-uploads); complete or abort one")
            upload = Upload(secrets.token_urlsafe(24), bucket, key, time.time_ns(), user)
            folder = self._folder(upload.upload_id)
            folder.mkdir()
            about = {"bucket": bucket, "key": key, "initiated_ns": upload.initiated_ns,
                     "user": user}
            (folder / _UPLOAD_FILE).write_text(json.dumps(about))
            self._uploads[upload.upload_id] = upload
            return upload

    def get(self, upload_id: str, bucket: str, key: str) -> Upload:
        """The upload ``upload_id`` of ``bucket/key``.

        Raises:
            S3HttpError: ``NoSuchUpload`` (unknown, expired, completed, aborted, or of
                another object).
        """
        with self._lock:
            upload = self._uploads.get(upload_id) if _UPLOAD_ID.fullmatch(upload_id) else None
            if upload is not None and self._expired(upload, time.time()) \
                    and not upload.completing:
                self._drop(upload)
                upload = None
        if upload is None or (upload.bucket, upload.key) != (bucket, key):
            raise S3HttpError("NoSuchUpload", "The specified upload does not exist. The upload "
                              "ID may be invalid, or the upload may have been aborted, "
                              "completed or expired.")
        return upload

    def uploads(self, bucket: str) -> list[Upload]:
        """The uploads in progress into ``bucket``, by key and upload id (the order the
        markers of ListMultipartUploads page in)."""
        with self._lock:
            self._sweep()
            found = [u for u in self._uploads.values() if u.bucket == bucket]
        return sorted(found, key=lambda u: (u.key, u.upload_id))

    def abort(self, upload: Upload) -> None:
        """Remove an upload and its parts.

        Raises:
            S3HttpError: ``OperationAborted`` while it is being completed.
        """
        with self._lock:
            if upload.completing:
                raise _completing()
            self._drop(upload)

    # ------------------------------------------------------------------ parts
    def part_writer(self, upload: Upload, number: int) -> PartWriter:
        """A writer of part ``number`` of ``upload`` (nothing is kept until it commits).

        Raises:
            S3HttpError: ``InvalidArgument`` for a part number outside 1..10000.
        """
        if not 1 <= number <= MAX_PART_NUMBER:
            raise S3HttpError("InvalidArgument", "Part number must be an integer between 1 "
                              f"and {MAX_PART_NUMBER}, inclusive")
        return PartWriter(self, upload, number)

    def _reserve(self, upload: Upload, number: int, nbytes: int) -> None:
        with self._lock:
            if upload.completing or upload.upload_id not in self._uploads:
                raise _completing() if upload.completing else S3HttpError(
                    "NoSuchUpload", "The upload was aborted, completed or expired while this "
                    "part arrived.")
            others = upload.size - (upload.parts[number].size if number in upload.parts else 0)
            mine = self._in_flight.get(upload.upload_id, 0) + nbytes
            if others + mine > self.config.max_upload_bytes:
                raise S3HttpError("EntityTooLarge", "the upload's parts are over the limit of "
                                  f"{self.config.max_upload_bytes} bytes (--s3-max-upload-mb)")
            if self._staged() + nbytes > self.config.staging_bytes:
                self._sweep()
                if self._staged() + nbytes > self.config.staging_bytes:
                    raise S3HttpError("SlowDown", "the staging area of multipart uploads is "
                                      f"full ({self.config.staging_bytes} bytes, "
                                      "--s3-staging-mb); try again later")
            self._in_flight[upload.upload_id] = mine

    def _release(self, upload: Upload, nbytes: int) -> None:
        with self._lock:
            left = self._in_flight.get(upload.upload_id, 0) - nbytes
            if left > 0:
                self._in_flight[upload.upload_id] = left
            else:
                self._in_flight.pop(upload.upload_id, None)

    def _commit(self, upload: Upload, part: Part, temporary: Path) -> None:
        with self._lock:
            if upload.completing or upload.upload_id not in self._uploads:
                temporary.unlink(missing_ok=True)
                raise _completing() if upload.completing else S3HttpError(
                    "NoSuchUpload", "The upload was aborted, completed or expired while this "
                    "part arrived.")
            folder = self._folder(upload.upload_id)
            name = f"part-{part.number:05d}"
            os.replace(temporary, folder / name)
            sidecar = folder / f".tmp-{name}.json"
            sidecar.write_text(json.dumps(asdict(part)))
            os.replace(sidecar, folder / f"{name}.json")
            upload.parts[part.number] = part

    # ------------------------------------------------------------------ complete
    def begin_complete(self, upload: Upload, wanted: list[tuple[int, str]],
                       checksums: list[dict[str, str]]) -> list[Part]:
        """Check a Complete request's part list and hold the upload for assembly.

        Args:
            wanted: ``(part number, ETag)`` in the request's order.
            checksums: per entry, the ``x-amz-checksum-<name>`` values it states.

        Raises:
            S3HttpError: ``InvalidPartOrder``, ``InvalidPart`` (missing, another ETag or
                checksum), ``EntityTooSmall`` (a part but the last under 5 MiB),
                ``OperationAborted`` (being completed already).
        """
        with self._lock:
            if upload.completing:
                raise _completing()
            numbers = [n for n, _ in wanted]
            if any(b <= a for a, b in itertools.pairwise(numbers)):
                raise S3HttpError("InvalidPartOrder", "The list of parts was not in ascending "
                                  "order. The parts list must be specified in order by part "
                                  "number.")
            parts: list[Part] = []
            for (number, tag), stated in zip(wanted, checksums, strict=True):
                part = upload.parts.get(number)
                if part is None or tag.strip().strip('"') != part.md5 or any(
                        part.checksums.get(h, v) != v for h, v in stated.items()):
                    raise S3HttpError("InvalidPart", f"Part {number} could not be found or "
                                      "its entity tag (or checksum) does not match the part "
                                      "uploaded.")
                parts.append(part)
            small = [p.number for p in parts[:-1] if p.size < MIN_PART_BYTES]
            if small:
                raise S3HttpError("EntityTooSmall", f"Part {small[0]} is smaller than the "
                                  f"minimum allowed size ({MIN_PART_BYTES} bytes) for a part "
                                  "other than the last.")
            upload.completing = True
            return parts

    def part_files(self, upload: Upload, parts: list[Part]) -> Iterator[Path]:
        """The files of ``parts`` (held by :meth:`begin_complete`), in order."""
        folder = self._folder(upload.upload_id)
        return (folder / f"part-{p.number:05d}" for p in parts)

    def end_complete(self, upload: Upload, *, done: bool) -> None:
        """Remove a completed upload, or (``done`` False) release it for another try."""
        with self._lock:
            upload.completing = False
            if done:
                self._drop(upload)


def _completing() -> S3HttpError:
    return S3HttpError("OperationAborted", "A conflicting operation (CompleteMultipartUpload) "
                       "is in progress against this upload. Try again.")


class PartWriter:
    """Streams one part to a temporary file in its upload's folder, counting it against the
    bounds as it arrives; :meth:`commit` keeps it, :meth:`discard` (or a failure) removes it."""

    def __init__(self, staging: Staging, upload: Upload, number: int) -> None:
        self._staging = staging
        self._upload = upload
        self._number = number
        fd, name = tempfile.mkstemp(dir=staging._folder(upload.upload_id), prefix=".tmp-")
        self._path = Path(name)
        self._handle: BinaryIO = os.fdopen(fd, "wb")
        self._md5 = hashlib.md5(usedforsecurity=False)
        self.size = 0

    def write(self, data: bytes) -> None:
        """Add the next bytes (blocking: call it from a worker thread).

        Raises:
            S3HttpError: a bound reached (see :meth:`Staging._reserve`).
        """
        self._staging._reserve(self._upload, self._number, len(data))
        self.size += len(data)
        self._handle.write(data)
        self._md5.update(data)

    def commit(self, checksums: dict[str, str]) -> Part:
        """Keep the part (replacing one of the same number)."""
        self._handle.close()
        part = Part(self._number, self.size, self._md5.hexdigest(), time.time_ns(), checksums)
        try:
            self._staging._commit(self._upload, part, self._path)
        finally:
            self._staging._release(self._upload, self.size)
        return part

    def discard(self) -> None:
        """Forget the part's bytes."""
        self._handle.close()
        self._path.unlink(missing_ok=True)
        self._staging._release(self._upload, self.size)
