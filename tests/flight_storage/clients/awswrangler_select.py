"""Run awswrangler's ``s3.select_query`` against an S3 endpoint and print the rows as JSON lines.

Run with the clients' venv (``.venv-clients/``, made by ``scripts/setup.sh``), never the
project's: awswrangler pins ``pyarrow<26``. It imports nothing of ours, so it talks to the server
over HTTP only, as any foreign client does. Usage::

    awswrangler_select.py ENDPOINT_URL S3_PATH FLAVOR_HEADER FLAVOR
"""

from __future__ import annotations

import sys
import warnings

import awswrangler as wr
import boto3


def main(endpoint_url: str, s3_path: str, flavor_header: str, flavor: str) -> None:
    """Select every row of the CSV object at ``s3_path`` and write them to stdout."""
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="y",
                            region_name="us-east-1")
    # awswrangler parses AWS's JSON records, so the caller names the flavour to ask for
    session.events.register("before-sign.s3.SelectObjectContent",
                            lambda request, **_: request.headers.__setitem__(flavor_header,
                                                                             flavor))
    wr.config.s3_endpoint_url = endpoint_url
    with warnings.catch_warnings():
        # select_query is deprecated upstream; the warning is not the answer
        warnings.simplefilter("ignore")
        frame = wr.s3.select_query(
            sql="SELECT * FROM s3object s", path=s3_path, input_serialization="CSV",
            input_serialization_params={"FileHeaderInfo": "Use"}, boto3_session=session)
    frame.to_json(sys.stdout, orient="records", lines=True)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
