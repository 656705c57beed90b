"""s3fs (fsspec) against the S3 door, run in ``.venv-s3fs`` by ``test_s3_door_tools.py``.

Usage: ``s3fs_client.py DOOR_URL``. Prints one line per step (``ls``, ``cat``, ``put``) for
the test to compare with the files; any failure is a traceback and a non-zero exit.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile

import s3fs


def main(url: str) -> None:
    fs = s3fs.S3FileSystem(key="x", secret="y", endpoint_url=url,
                           client_kwargs={"region_name": "us-east-1"})
    print("ls", " ".join(sorted(fs.ls("sales/orders"))))
    print("cat", hashlib.sha256(fs.cat("sales/orders/2024-01.csv")).hexdigest())
    with tempfile.TemporaryDirectory() as folder:
        big = os.path.join(folder, "big.bin")
        with open(big, "wb") as out:
            out.write(os.urandom(12 << 20))
        fs.put(big, "work/s3fs/big.bin")  # past s3fs's 5 MiB blocks: a multipart upload
        with fs.open("work/s3fs/big.bin", "rb") as handle:
            handle.seek(5 << 20)
            with open(big, "rb") as original:
                original.seek(5 << 20)
                assert handle.read(1 << 20) == original.read(1 << 20)
        print("put", fs.info("work/s3fs/big.bin")["size"])
    fs.pipe("work/s3fs/gone.txt", b"x")
    assert fs.exists("work/s3fs/gone.txt")
    fs.rm("work/s3fs/gone.txt")


if __name__ == "__main__":
    main(sys.argv[1])
