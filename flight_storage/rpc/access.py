"""Who may read or write a bucket: the one access policy of both doors.

Every check of a caller's rights on a bucket (or an Iceberg catalog, named like a bucket) asks
this module, whichever door the call came through: Flight SQL statements and S3 requests,
metadata listings, actions, bulk ingest, and every call of the S3 door. The grants themselves
are the users file's (``rpc/auth.py``: a user's ``buckets`` and ``write`` lists); with
authentication off (no user) everything is allowed.

Each refusal is :class:`~flight_storage.errors.AccessDeniedError` naming the user and what it
may not do (the S3 door answers it as ``AccessDenied``, 403). A caller names the refused act
(``verb``) and may add a hint, so the messages stay those each call has always given.
"""

from __future__ import annotations

from collections.abc import Iterable

from flight_storage.errors import AccessDeniedError
from flight_storage.rpc.auth import User


def may_read(user: User | None, bucket: str) -> bool:
    """True when ``user`` (None: authentication is off) may read ``bucket``."""
    return user is None or "*" in user.buckets or bucket in user.buckets


def may_write(user: User | None, bucket: str) -> bool:
    """True when ``user`` may write ``bucket``: the users file's ``write`` list, over a bucket
    it may read."""
    return user is None or (may_read(user, bucket)
                            and ("*" in user.write_buckets or bucket in user.write_buckets))


def readable(user: User | None, buckets: Iterable[str]) -> list[str]:
    """The names of ``buckets`` (or catalogs) ``user`` may read, in their order."""
    return [bucket for bucket in buckets if may_read(user, bucket)]


def check_read(user: User | None, bucket: str, *, verb: str = "read bucket") -> None:
    """Refuse ``bucket`` unless ``user`` may read it.

    Raises:
        AccessDeniedError: ``user <name> may not <verb> <bucket>``.
    """
    if not may_read(user, bucket):
        raise AccessDeniedError(_refusal(user, verb, bucket))


def check_write(user: User | None, bucket: str, *, hint: str = "") -> None:
    """Refuse a write into ``bucket`` unless ``user`` may write it.

    Raises:
        AccessDeniedError: ``user <name> may not write bucket <bucket>`` and ``hint``.
    """
    if not may_write(user, bucket):
        raise AccessDeniedError(_refusal(user, "write bucket", bucket) + hint)


def _refusal(user: User | None, verb: str, bucket: str) -> str:
    name = user.name if user is not None else "(anonymous)"
    return f"user {name} may not {verb} {bucket}"
