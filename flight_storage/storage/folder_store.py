"""Buckets that are folders of this machine; names never leave the bucket's folder.

``FolderBuckets(root)`` serves every top-level folder of ``root`` as a bucket (the data
directory of ``flight-select serve --data DIR``); ``FolderBuckets.single(name, folder)`` serves
one folder as bucket ``name`` (``--data NAME=DIR``). An object is a regular file below its
bucket's folder, named by its ``/``-separated path; dotfiles and dot-folders are never objects
(the bucket configuration ``.flight-select.json`` among them), and a symbolic link that points
out of the bucket is refused.

A file's version is ``f:<inode>:<ctime ns>:<size>:<mtime ns>``: its change time moves on every
write and cannot be set back by ``touch``, ``cp -p`` or ``rsync -t``, so content cannot change
under the same version (a rewrite in place with the old modification time restored changes it).
That identity is this machine's own: a copy on another machine has another inode. Where copies
must be recognised as equal (the replicas of a cluster's holdings, docs/cluster.md), buckets are
served with ``content_versions``: the version is ``sha256:<digest of the bytes>``, computed once
per file identity (:class:`~flight_storage.storage.version_cache.VersionCache`), so a replica
whose bytes differ, whatever its size and times, is a different version.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa

from flight_storage.errors import (
    AccessDeniedError,
    InvalidRequestError,
    ObjectNotFoundError,
    StaleTicketError,
    StorageError,
)
from flight_storage.storage.stores import (
    COMMITS_FOLDER,
    StoredObject,
    commit_folder,
    commit_generation,
    commit_name,
)
from flight_storage.storage.version_cache import VersionCache

if TYPE_CHECKING:
    from datafusion import SessionContext

BUCKET_CONFIG = ".flight-select.json"

MAX_KEY_BYTES = 1024
"""S3's limit on a key's UTF-8 length."""

# errno -> (error class, S3 code) for a key whose file cannot be looked up
_LOOKUP_ERRORS: dict[int, tuple[type[StorageError], str]] = {
    errno.ENAMETOOLONG: (InvalidRequestError, "KeyTooLongError"),
    errno.ELOOP: (ObjectNotFoundError, "NoSuchKey"),
    errno.EACCES: (AccessDeniedError, "AccessDenied"),
    errno.EPERM: (AccessDeniedError, "AccessDenied"),
}


def check_name(kind: str, name: str) -> None:
    """Refuse names that could leave a folder or that S3 would refuse.

    Raises:
        AccessDeniedError: empty, absolute, ``..``/``.`` parts, NUL or backslash.
        InvalidRequestError: not UTF-8 (``InvalidArgument``) or over 1,024 bytes.
    """
    if not name or "\x00" in name or name.startswith("/") or "\\" in name:
        raise AccessDeniedError(f"invalid {kind} name {name!r}")
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise AccessDeniedError(f"invalid {kind} name {name!r}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequestError(f"{kind} name {name!r} is not valid UTF-8",
                                  code="InvalidArgument") from None
    if size > MAX_KEY_BYTES:
        raise InvalidRequestError(f"{kind} name is {size} bytes; the limit is {MAX_KEY_BYTES}",
                                  code="KeyTooLongError")


@functools.lru_cache(maxsize=256)
def _name_max(folder: str) -> int:
    """The longest file name (bytes) the file system of ``folder`` takes (255 if unknown)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_components(kind: str, name: str, folder: str) -> None:
    """Refuse a name a folder bucket cannot hold: each ``/``-separated part is a file or
    folder name, at most the file system's name limit (255 bytes on most), though S3 allows a
    1,024-byte key in one part. Asked on every read and write of a folder bucket, so PUT, GET,
    copies and multipart uploads answer alike.

    Raises:
        InvalidRequestError: ``KeyTooLongError`` naming the part's length and the limit.
    """
    limit = _name_max(folder)
    for part in name.split("/"):
        size = len(part.encode("utf-8", errors="surrogateescape"))
        if size > limit:
            raise InvalidRequestError(
                f"{kind} name has a part of {size} bytes between slashes; this bucket is a folder "
                f"whose file system takes names of at most {limit} bytes (S3's limit, "
                f"{MAX_KEY_BYTES} bytes, is for the whole {kind})", code="KeyTooLongError")


def file_version(st: os.stat_result) -> str:
    """The version of a file as :func:`os.stat` sees it (see the module's docstring)."""
    return f"f:{st.st_ino}:{st.st_ctime_ns}:{st.st_size}:{st.st_mtime_ns}"


_DIGESTS: VersionCache[str] = VersionCache(max_entries=65536)
"""Content digests by file identity, for every bucket of the process."""


def content_version(path: Path, st: os.stat_result) -> str:
    """``sha256:<hex>`` of the file's bytes, computed once per file identity."""

    def digest() -> str:
        with open(path, "rb") as handle:
            return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()

    return _DIGESTS.get((st.st_dev, file_version(st)), digest)


class FolderBucket:
    """One bucket stored as a folder.

    Args:
        name: the bucket's name (for messages).
        folder: its folder; every file handed out is inside it.
        content_versions: versions are digests of the bytes (equal on every copy), not the
            file's identity on this machine.
    """

    writable = True

    def __init__(self, name: str, folder: Path, *, content_versions: bool = False,
                 resolved: Path | None = None) -> None:
        self.name = name
        self.folder = folder
        # ``resolved``: the folder's real path when the caller knows it (no link in it)
        self._resolved = resolved if resolved is not None else folder.resolve()
        self._resolved_text = str(self._resolved)
        self.content_versions = content_versions

    def _version(self, path: Path, st: os.stat_result) -> str:
        return content_version(path, st) if self.content_versions else file_version(st)

    @property
    def description(self) -> str:
        return str(self.folder)

    # ------------------------------------------------------------------ reading
    def path(self, key: str) -> Path:
        """The file of ``key`` as it is now, refusing ``..``, absolute paths, NUL bytes,
        dotfiles and links out of the bucket."""
        check_name("key", key)
        check_components("key", key, self._resolved_text)
        if any(part.startswith(".") for part in key.split("/")):
            raise ObjectNotFoundError(f"no such key: {self.name}/{key}")
        # os.path on text: pathlib's parsing cost more than the lstat calls (every DoGet asks)
        try:
            resolved = os.path.realpath(os.path.join(self._resolved_text, key), strict=True)
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFoundError(f"no such key: {self.name}/{key}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ObjectNotFoundError(
                    f"no such key: {self.name}/{key} (a symlink loop)") from None
            kind, code = _LOOKUP_ERRORS.get(exc.errno or 0, (ObjectNotFoundError, "NoSuchKey"))
            raise kind(f"{self.name}/{key}: {exc.strerror}", code=code) from None
        inside = self._resolved_text
        if resolved != inside and not resolved.startswith(inside + os.sep):
            raise AccessDeniedError(f"object {self.name}/{key} points outside its bucket")
        return Path(resolved)

    def head(self, key: str) -> StoredObject:
        path = self.path(key)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise ObjectNotFoundError(f"no such key: {self.name}/{key}") from None
        except OSError as exc:
            kind, code = _LOOKUP_ERRORS.get(exc.errno or 0, (ObjectNotFoundError, "NoSuchKey"))
            raise kind(f"{self.name}/{key}: {exc.strerror}", code=code) from None
        if not stat.S_ISREG(st.st_mode):
            raise ObjectNotFoundError(f"no such key: {self.name}/{key}")
        return StoredObject(key, st.st_size, st.st_mtime_ns, self._version(path, st))

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """The objects whose keys start with ``prefix``, by key: only the folder the prefix
        names (up to its last ``/``) is walked, and only its sub-folders the prefix can
        reach, so a prefix table lists its own folder, not the bucket beside it."""
        if prefix and ("\x00" in prefix or prefix.startswith("/") or ".." in prefix.split("/")):
            raise AccessDeniedError(f"invalid prefix {prefix!r}")
        start = self._prefix_folder(prefix)
        if start is None:
            return
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
            rel = Path(dirpath).relative_to(self.folder).as_posix()
            above = "" if rel == "." else f"{rel}/"
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and _reaches(
                f"{above}{d}/", prefix))
            keys += [f"{above}{name}" for name in filenames
                     if not name.startswith(".") and f"{above}{name}".startswith(prefix)]
        for key in sorted(keys):
            try:
                yield self.head(key)
            except (ObjectNotFoundError, AccessDeniedError, InvalidRequestError):
                continue  # vanished, a link out or a loop, an unusable name: not listed

    def _prefix_folder(self, prefix: str) -> Path | None:
        """The folder of the prefix's whole parts (``a/b/`` of ``a/b/c``): a real folder of
        the bucket, reached through no link or dot-folder; None when there is none."""
        folder = self.folder
        for part in prefix.split("/")[:-1]:
            if part.startswith("."):
                return None
            folder = folder / part
            try:
                if not stat.S_ISDIR(os.lstat(folder).st_mode):
                    return None
            except OSError:
                return None
        return folder

    def _current(self, obj: StoredObject) -> Path:
        path = self.path(obj.key)
        try:
            version = self._version(path, path.stat())
        except OSError:
            version = ""
        if version != obj.version:
            raise StaleTicketError(
                f"{self.name}/{obj.key} changed after the query was planned; plan it again",
                code="PreconditionFailed")
        return path

    def open(self, obj: StoredObject, start: int = 0) -> BinaryIO:
        stream = open(self._current(obj), "rb")  # noqa: SIM115 - the caller closes it
        if start:
            stream.seek(start)
        return stream

    def open_random_access(self, obj: StoredObject) -> pa.NativeFile:
        return pa.OSFile(str(self._current(obj)))

    def datafusion_url(self, obj: StoredObject) -> str:
        return str(self.path(obj.key))

    def register(self, ctx: SessionContext) -> None:
        """Local files need no object store."""

    def portable_register(self) -> Callable[[SessionContext], None]:
        return register_nothing

    def config_text(self) -> str | None:
        path = self.folder / BUCKET_CONFIG
        if not path.is_file() or path.is_symlink():
            return None
        return path.read_text(encoding="utf-8")

    def created_ns(self) -> int:
        try:
            return self.folder.stat().st_mtime_ns
        except OSError:
            return 0

    # ------------------------------------------------------------------ writing
    def new_path(self, key: str) -> Path:
        """Where ``key`` is written: inside the bucket, never through a dot-folder or link.

        Raises:
            AccessDeniedError: a name that could leave the bucket or that names a hidden file.
        """
        check_name("key", key)
        check_components("key", key, self._resolved_text)
        parts = key.split("/")
        if any(p.startswith(".") for p in parts):
            raise AccessDeniedError(f"invalid key name {key!r}")
        path = self._resolved.joinpath(*parts)
        probe = path.parent
        while probe != self._resolved:  # no existing link on the way down
            if probe.is_symlink():
                raise AccessDeniedError(f"key {key!r} passes a symbolic link")
            probe = probe.parent
        if path.is_symlink() or path.is_dir():
            raise AccessDeniedError(f"key {key!r} names a link or a folder")
        return path

    def temporary_folder(self) -> Path | None:
        return self._resolved

    def put_file(self, key: str, file: Path, size: int) -> StoredObject:  # noqa: ARG002 - BucketStore.put_file
        """Rename ``file`` over ``key`` (running scans keep the old inode)."""
        path = self.new_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(file, path)
        return self.head(key)

    def copy_in(self, key: str, source: object, obj: StoredObject) -> StoredObject | None:
        """A kernel copy (``copy_file_range``: a reflink where the file system has them) of
        another folder bucket's file into a temporary file here, renamed over ``key`` once
        the source is found still to be ``obj``'s version."""
        if not isinstance(source, FolderBucket):
            return None
        path = self.new_path(key)
        with source.open(obj) as reading:
            fd, temporary = tempfile.mkstemp(dir=self._resolved, prefix=".copy-")
            try:
                with os.fdopen(fd, "wb") as writing:
                    _kernel_copy(reading.fileno(), writing.fileno(), obj.size)
                source._current(obj)  # changed in place while copied: PreconditionFailed
                path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        return self.head(key)

    # ------------------------------------------------------------------ commit records
    def _commits(self, table: str) -> Path:
        return self._resolved / commit_folder(table)

    def commit_generations(self, table: str) -> Sequence[int]:
        try:
            names = os.listdir(self._commits(table))
        except FileNotFoundError:
            return []
        return sorted(g for g in map(commit_generation, names) if g is not None)

    def read_commit(self, table: str, generation: int) -> bytes | None:
        try:
            return (self._commits(table) / commit_name(generation)).read_bytes()
        except FileNotFoundError:
            return None

    def create_commit(self, table: str, generation: int, body: bytes) -> bool:
        """The record is written whole to a temporary file, then ``link``-ed to its name:
        the link fails when the name exists, atomically for every process on the folder (a
        rename would replace it)."""
        folder = self._commits(table)
        folder.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".record-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(body)
            os.link(temporary, folder / commit_name(generation))
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(temporary)

    def delete_commit(self, table: str, generation: int) -> None:
        (self._commits(table) / commit_name(generation)).unlink(missing_ok=True)

    def delete(self, key: str) -> None:
        """Remove ``key`` and the folders it leaves empty."""
        try:
            path = self.path(key)
        except ObjectNotFoundError:
            return
        path.unlink(missing_ok=True)
        folder = path.parent
        while folder != self._resolved and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent


def _reaches(folder: str, prefix: str) -> bool:
    """Whether keys under ``folder`` (``a/b/``) can start with ``prefix``."""
    return folder.startswith(prefix) or prefix.startswith(folder)


def _kernel_copy(source: int, target: int, size: int) -> None:
    """Copy ``size`` bytes from the start of ``source`` in the kernel."""
    done = 0
    while done < size:
        copied = os.copy_file_range(source, target, min(size - done, 1 << 30), done, done)
        if copied == 0:
            raise StaleTicketError("the source object ended early while it was copied",
                                   code="PreconditionFailed")
        done += copied


class FolderBuckets:
    """Every top-level folder of ``root`` as a bucket (or, :meth:`single`, one folder).

    Args:
        root: the data directory.

    Raises:
        InvalidRequestError: ``root`` is not a folder (it names a file, or nothing).
    """

    def __init__(self, root: Path, *, only: str | None = None,
                 content_versions: bool = False) -> None:
        if not root.is_dir():
            what = "a file" if root.exists() else "not found"
            raise InvalidRequestError(f"--data {root}: {what}; give a folder of buckets")
        self.root = root.resolve(strict=True)
        self._only = only
        self.content_versions = content_versions

    @classmethod
    def single(cls, name: str, folder: Path, *, content_versions: bool = False
               ) -> FolderBuckets:
        """``folder`` itself as the one bucket ``name``."""
        check_name("bucket", name)
        return cls(folder, only=name, content_versions=content_versions)

    @property
    def description(self) -> str:
        return str(self.root) if self._only is None else f"{self._only}={self.root}"

    def names(self) -> list[str]:
        if self._only is not None:
            return [self._only]
        return sorted(
            entry.name
            for entry in os.scandir(self.root)
            if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
        )

    def bucket(self, name: str) -> FolderBucket | None:
        if self._only is not None:
            return (FolderBucket(name, self.root, content_versions=self.content_versions,
                                 resolved=self.root) if name == self._only else None)
        check_name("bucket", name)
        if "/" in name or name.startswith("."):
            raise AccessDeniedError(f"invalid bucket name {name!r}")
        path = self.root / name
        try:  # a folder, not a link to one: its real path is the resolved root's child
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                return None
        except OSError:
            return None
        return FolderBucket(name, path, content_versions=self.content_versions, resolved=path)

    def create_bucket(self, name: str) -> None:
        if self._only is not None:
            raise InvalidRequestError(f"{self.description} serves one bucket; it holds no others")
        (self.root / name).mkdir()

    def delete_bucket(self, name: str) -> None:
        bucket = self.bucket(name)
        if bucket is None:
            raise ObjectNotFoundError(f"no such bucket: {name}", code="NoSuchBucket")
        if self._only is not None:
            raise InvalidRequestError(f"{self.description} is served as a bucket; it cannot be "
                                      "deleted through the server")
        if next(bucket.list(), None) is None:  # no object: its tables' records go with it
            shutil.rmtree(bucket.folder / COMMITS_FOLDER, ignore_errors=True)
        for entry in os.scandir(bucket.folder):
            if entry.is_file(follow_symlinks=False) and entry.name.startswith("."):
                os.unlink(entry.path)
        bucket.folder.rmdir()


def register_nothing(ctx: SessionContext) -> None:  # noqa: ARG001 - BucketStore.register
    """Local files need no object store (a module function: picklable)."""
