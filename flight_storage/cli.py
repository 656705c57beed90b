"""``flight-select``: run the storage server, or one S3 Select query on a local object.

    flight-select serve --data DIR [--host 127.0.0.1] [--port 0] [--auth USERS_FILE]
                        [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM]] [limits...]
                        [--cluster FILE --node NAME --ticket-secret-file FILE]
    flight-select cluster status --cluster FILE [--user NAME]
    flight-select cache status --location URL [--user NAME] [--json]
    flight-select query FILE --expression SQL [--input-serialization JSON]
                        [--output-serialization JSON] [--scan-range START:END]
                        [--flavor aws|ceph|standard]

``query`` answers as AWS S3 Select by default (its printing is valid CSV and JSON);
``--flavor ceph`` answers exactly as Ceph RGW, ``--flavor standard`` adds standard SQL.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flight_storage.errors import StorageError
from flight_storage.rpc.auth import add_user_arguments, run_add_user
from flight_storage.rpc.s3_http.door_config import S3DoorConfig
from select_dialect.flavors import FLAVOR_NAMES, FLAVORS, S3_API_DEFAULT

if TYPE_CHECKING:
    from flight_storage.rpc.config import ServerConfig
    from flight_storage.rpc.server import StorageServer
    from flight_storage.storage.cluster import ClusterDescription, ClusterNode
    from flight_storage.workers import Workers

    _Topology = tuple[ClusterDescription | None, ClusterNode | None, Workers | None]

QUERY_DEFAULT_FLAVOR = S3_API_DEFAULT
"""``flight-select query`` stands for one S3 SelectObjectContent call: AWS's answer."""


def _json_arg(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def _scan_range_arg(text: str) -> tuple[int, int]:
    start, sep, end = text.partition(":")
    try:
        lo = int(start) if start else 0
        hi = int(end) if end else (1 << 62)
    except ValueError:
        raise argparse.ArgumentTypeError("expected START:END in bytes") from None
    if not sep or lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError("expected START:END with 0 <= START <= END")
    return lo, hi


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flight-select", description="S3 Select next to the data, over Arrow Flight SQL."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    shows_defaults = argparse.ArgumentDefaultsHelpFormatter
    serve = commands.add_parser("serve", help="run the Flight SQL storage server",
                                formatter_class=shows_defaults)
    _add_serve_arguments(serve)

    cluster = commands.add_parser("cluster", help="operate a storage cluster (docs/cluster.md)")
    cluster_commands = cluster.add_subparsers(dest="cluster_command", required=True)
    status = cluster_commands.add_parser(
        "status", help="each node: up or down, objects and bytes it holds")
    status.add_argument("--cluster", required=True, type=Path, help="the cluster file")
    status.add_argument("--user", help="user name when the nodes use --auth (password from "
                        "$FLIGHT_SELECT_PASSWORD)")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")

    cache = commands.add_parser("cache", help="a running server's decoded cache")
    cache_status = cache.add_subparsers(dest="cache_command", required=True).add_parser(
        "status", help="entries, bytes, hits, misses and fills of serve --cache-dir")
    cache_status.add_argument("--location", required=True,
                              help="the server, e.g. grpc://127.0.0.1:8815")
    cache_status.add_argument("--user", help="user name when the server uses --auth "
                              "(password from $FLIGHT_SELECT_PASSWORD)")
    cache_status.add_argument("--tls-root-certs", type=Path,
                              help="PEM to trust for a grpc+tls location")
    cache_status.add_argument("--json", action="store_true", help="print JSON")

    add_user_arguments(commands.add_parser(
        "add-user", description="add or replace a user in a users file",
        help="add a user to a users file: USERS_FILE NAME [--bucket B ...] [--password-stdin]"))

    query = commands.add_parser("query", help="run one S3 Select query on a local object",
                                formatter_class=shows_defaults)
    query.add_argument("file", help="object file, or - for standard input")
    query.add_argument("--expression", "-e", required=True, help="s3-select SQL")
    query.add_argument("--input-serialization", type=_json_arg,
                       help='AWS InputSerialization, e.g. \'{"CSV": {"FileHeaderInfo": "USE"}}\'')
    query.add_argument("--output-serialization", type=_json_arg,
                       help='AWS OutputSerialization, e.g. \'{"JSON": {}}\'')
    query.add_argument("--scan-range", type=_scan_range_arg, help="START:END bytes (End inclusive)")
    query.add_argument("--flavor", choices=FLAVOR_NAMES, default=QUERY_DEFAULT_FLAVOR,
                       help="dialect and printing rules: "
                       + "; ".join(f"{f.name}: {f.summary}" for f in FLAVORS.values()))
    return parser


def _add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    from flight_storage.execution.plan_types import EngineConfig
    from flight_storage.formats.csv_sniff import TableReading
    from flight_storage.formats.typed_columns import BAD_VALUES
    from flight_storage.rpc.config import serve_defaults

    # one owner per default: the config classes'; the options only show and pass them
    defaults = serve_defaults()
    engine = EngineConfig()

    serve.add_argument(
        "--data", required=True, action="append", metavar="LOCATION",
        help="where the buckets are, repeatable: DIR (each top-level folder a bucket), s3:// "
        "(every bucket of the object store), s3://BUCKET[/PREFIX], or NAME=DIR|s3://... (one "
        "bucket named NAME); docs/storage.md")
    serve.add_argument(
        "--iceberg", action="append", default=[], metavar="NAME=sql:URL|rest:URL",
        help="an Apache Iceberg catalog whose tables are served as \"NAME\".\"namespace\"."
        "\"table\", repeatable: NAME=sql:sqlite:///PATH.db?warehouse=s3://BUCKET/PREFIX (or "
        "file:///DIR), NAME=rest:http://HOST:PORT[?warehouse=W]; docs/storage.md")
    store = serve.add_argument_group(
        "object store (s3:// locations; default: the AWS conventions, AWS_ENDPOINT_URL_S3, "
        "AWS_ACCESS_KEY_ID, AWS_PROFILE, ...)")
    store.add_argument("--store-endpoint-url", help="the store's URL, e.g. http://127.0.0.1:8333")
    store.add_argument("--store-region", help="the signing region (default $AWS_REGION, the "
                       "profile's, or us-east-1)")
    store.add_argument("--store-profile", help="a profile of the shared AWS config files")
    store.add_argument("--store-max-attempts", type=_attempts,
                       help="tries of one store request, and of one ranged read whose body is "
                       "cut off mid-way, each from where it broke (default 4; docs/storage.md)")
    store.add_argument("--store-cache-mb", type=int, default=0,
                       help="keep copies of the store objects read on local disk, up to this "
                       "many MiB (one file per object version; 0: off; docs/storage.md)")
    store.add_argument("--store-cache-dir", type=Path,
                       help="where the copies go (default: the system's temporary folder)")
    decoded = serve.add_argument_group(
        "decoded cache (docs/storage.md, Decoded cache): CSV objects kept decoded as Parquet, "
        "so repeated queries read columns instead of parsing text")
    decoded.add_argument("--cache-dir", type=Path,
                         help="where the decoded cache keeps its entries (default: no decoded "
                         "cache); entries found there are reused after a restart")
    decoded.add_argument("--cache-mb", type=int, default=engine.cache_bytes >> 20,
                         help="the most MiB of entries (least recently used evicted first; "
                         "an entry over a quarter of it is not kept)")
    serve.add_argument("--host", help="address to bind (default: loopback, 127.0.0.1, or "
                       "the node's address in --cluster)")
    serve.add_argument("--port", type=int, help="port; 0 picks a free one (default: 8815, or "
                       "the node's port in --cluster)")
    serve.add_argument("--metrics-port", type=int,
                       help="serve Prometheus /metrics and the /healthz and /readyz probes over "
                       "HTTP on this port of --host; 0 picks a free one (default: off; README, "
                       "Operating)")
    serve.add_argument(
        "--ticket-secret-file",
        type=Path,
        help="file holding the key that signs tickets and tokens (share it between replicas "
        "and cluster nodes: required with --cluster); default: $FLIGHT_SELECT_TICKET_SECRET or "
        "a random key per process",
    )
    serve.add_argument(
        "--previous-ticket-secret-file", type=Path, action="append", default=[],
        metavar="FILE",
        help="a key that signed before --ticket-secret-file's (repeatable): what it signed "
        "(tickets, handles, tokens, session cookies, staged ingests) is still accepted, nothing "
        "new is signed with it; drop it once --ticket-max-age has passed (key rotation)")
    reading = serve.add_argument_group(
        "reading CSV tables (Flight SQL statements; see README, Configuration reference)")
    reading.add_argument("--no-sniff", dest="sniff", action="store_false",
                         default=TableReading.sniff,
                         help="read CSV objects no configuration entry covers as S3 Select does "
                         "(no header, string columns _1.._N) in the standard flavour too, "
                         "instead of inferring their header and types (sniffing: %(default)s)")
    reading.add_argument("--sniff-kb", type=int, default=TableReading.sample_bytes >> 10,
                         help="KiB read from an object's start to infer its header and types")
    reading.add_argument("--bad-values", choices=BAD_VALUES, default=TableReading.bad_values,
                         help="a field that does not convert to its column's type: error "
                         "(the query fails naming the object, line and column) or null (read "
                         "as NULL, with a warning in the FlightInfo and the result schema); "
                         "a configuration entry's bad_values wins")
    cluster = serve.add_argument_group(
        "cluster (docs/cluster.md): every node gets the same cluster file, the same "
        "--ticket-secret-file and the same --auth users file")
    cluster.add_argument("--cluster", type=Path, metavar="FILE",
                         help="cluster description (JSON): nodes, what each holds, replicas")
    cluster.add_argument("--node", metavar="NAME", help="this node's name in --cluster")
    cluster.add_argument("--workers", type=int, default=1, metavar="N",
                         help="serve from N processes on this host, as one fleet over the "
                         "same --data (each endpoint can be served by any of them: their "
                         "Python work spreads over the cores); clients connect to this one")
    serve.add_argument("--ticket-max-age", type=int, default=defaults["ticket_max_age_s"],
                       help="seconds a ticket (endpoint) stays valid")
    security = serve.add_argument_group("security")
    security.add_argument("--auth", type=Path, metavar="USERS_FILE",
                          help="require user name and password (see flight_storage.rpc.auth)")
    security.add_argument("--allow-anonymous", action="store_true",
                          help="serve a non-loopback address without --auth")
    security.add_argument("--writable", action="store_true",
                          help="let Flight SQL bulk ingest (ADBC adbc_ingest, the Spark "
                          "writer) write Parquet objects, for users with the bucket's "
                          "write right (the S3 door's writes stay under --s3-writable)")
    security.add_argument("--default-catalog", metavar="BUCKET",
                          help="the session catalog of callers that set none: one-part table "
                          "names resolve in this bucket")
    security.add_argument("--token-ttl", type=int, default=defaults["token_ttl_s"],
                          help="seconds a bearer token stays valid")
    security.add_argument("--tls-cert", type=Path, help="PEM certificate: serve grpc+tls")
    security.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    security.add_argument("--tls-client-ca", type=Path,
                          help="PEM CA that client certificates must chain to (mutual TLS)")
    limits = serve.add_argument_group("limits")
    limits.add_argument("--partition-mb", type=int, default=engine.partition_bytes >> 20,
                        help="split CSV/NDJSON objects into byte ranges of at most this size")
    limits.add_argument("--endpoint-min-mb", type=int, default=engine.endpoint_min_bytes >> 20,
                        help="cut an object into one byte range (endpoint) per core only while "
                        "each keeps at least this size; a smaller object is one endpoint read on "
                        "every core")
    limits.add_argument("--max-parallelism", type=int, default=engine.max_parallelism,
                        metavar="N", help="the most byte ranges (endpoints) a client may ask "
                        "an object cut into with the x-flight-select-parallelism header")
    limits.add_argument("--memory-limit-mb", type=int,
                        default=(engine.memory_limit_bytes or 0) >> 20,
                        help="DataFusion memory pool per query")
    limits.add_argument("--max-query-chars", type=int, default=engine.max_query_chars,
                        help="longest statement accepted")
    limits.add_argument("--max-record-kb", type=int, default=engine.max_record_bytes >> 10,
                        help="longest CSV/JSON record accepted")
    limits.add_argument("--engine-cores", type=int, default=engine.cores, metavar="N",
                        help="plan and compute as on an N-core host: DataFusion partitions, "
                        "byte ranges and endpoints per core (default 0: the cores this process "
                        "may use, its CPU affinity); benchmarks plan for a bigger host with it")
    limits.add_argument("--engine-workers", type=int, default=engine.engine_workers,
                        metavar="N", help="worker processes aggregates over local files and "
                        "store objects run in, killed when their query stops (0: all in the "
                        "server's process)")
    limits.add_argument("--max-columns", type=int, default=engine.max_columns,
                        help="widest table a CSV query may make (select * of wide records)")
    limits.add_argument("--max-concurrent-queries", type=int,
                        default=defaults["max_concurrent_queries"],
                        help="result streams computing at once (a stream holds a slot only "
                        "while it computes a batch); default twice the cores, at least 4")
    limits.add_argument("--queue-wait", type=float, default=defaults["queue_wait_s"],
                        help="seconds a stream waits for a compute slot before SlowDown")
    limits.add_argument("--max-open-streams", type=int, default=defaults["max_open_streams"],
                        help="result streams open at once (one per endpoint being read); more "
                        "are refused with SlowDown")
    limits.add_argument("--max-parameter-bytes", type=int,
                        default=defaults["max_parameter_bytes"],
                        help="largest batch of statement parameters a client may bind")
    limits.add_argument("--max-ingest-mb", type=int,
                        default=defaults["max_ingest_bytes"] >> 20,
                        help="Arrow data one bulk ingest may send (with --writable)")
    limits.add_argument("--max-abort-marks", type=int, default=defaults["max_abort_marks"],
                        help="aborted write jobs one bucket remembers at once (AbortIngest "
                        "past it: TooManyAbortedJobs)")
    limits.add_argument("--idle-timeout", type=float, default=defaults["idle_timeout_s"],
                        help="seconds a client may leave a stream unread before it is cancelled")
    limits.add_argument("--query-timeout", type=float, default=defaults["query_timeout_s"],
                        help="seconds")
    limits.add_argument("--keepalive", type=float, default=defaults["keepalive_s"],
                        help="seconds between empty batches while a scan finds nothing")
    limits.add_argument("--shutdown-grace", type=float, default=defaults["shutdown_grace_s"],
                        help="seconds running streams may finish after SIGTERM")
    s3 = serve.add_argument_group("S3 door (the S3 REST API over HTTP, same process)")
    door = S3DoorConfig()
    s3.add_argument("--s3-port", type=int, help="serve the S3 API on this port (0: a free one); "
                    "off unless given")
    s3.add_argument("--s3-host", default=door.host, help="address of the S3 door")
    s3.add_argument("--s3-writable", action="store_true",
                    help="allow CreateBucket, PutObject, DeleteObject, DeleteBucket")
    s3.add_argument("--s3-max-request-kb", type=int, default=door.max_request_bytes >> 10,
                    help="largest SelectObjectContent (or other non-upload) request body")
    s3.add_argument("--s3-max-object-mb", type=int, default=door.max_object_bytes >> 20,
                    help="largest PutObject body (streamed to disk, not held in memory)")
    s3.add_argument("--s3-max-upload-mb", type=int, default=door.max_upload_bytes >> 20,
                    help="largest object a multipart upload or a copy makes (EntityTooLarge)")
    s3.add_argument("--s3-staging-mb", type=int, default=door.staging_bytes >> 20,
                    help="MiB of parts of every multipart upload in progress together, on "
                    "disk (SlowDown while full)")
    s3.add_argument("--s3-max-uploads", type=int, default=door.max_uploads,
                    help="multipart uploads in progress at once (SlowDown)")
    s3.add_argument("--s3-upload-expiry", type=float, default=door.upload_expiry_s,
                    help="seconds after which an upload not completed is removed with its "
                    "parts")
    s3.add_argument("--s3-staging-dir", type=Path, default=door.staging_dir,
                    help="where parts wait for CompleteMultipartUpload (default: a temporary "
                    "folder removed at exit; a folder given keeps uploads across restarts)")
    s3.add_argument("--s3-body-timeout", type=float, default=door.body_timeout_s,
                    help="seconds a client has to send its request body")
    s3.add_argument("--s3-header-timeout", type=float, default=door.header_timeout_s,
                    help="seconds a connection has to send a whole request head, from opening "
                    "or from its previous answer; then it is closed")
    s3.add_argument("--s3-max-connections", type=int, default=door.max_connections,
                    help="connections served at once; more are answered 503")
    s3.add_argument("--s3-flavor", choices=FLAVOR_NAMES, default=door.flavor,
                    help="flavour of a SelectObjectContent request whose "
                    "x-flight-select-flavor header names none (ceph: answer as Ceph RGW)")
    serve.add_argument("--log-level", default="INFO")


def _ticket_secret(path: Path | None) -> bytes:
    if path is not None:
        return path.read_bytes().strip()
    return os.environ.get("FLIGHT_SELECT_TICKET_SECRET", "").encode()


def _attempts(text: str) -> int:
    """``--store-max-attempts``: a whole number from 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of tries, 1 or more")
    return value


class _Refused(Exception):
    """Why the server will not start: printed after ``flight-select:``, exit status 2."""


def _serve(args: argparse.Namespace) -> int:
    from flight_storage.rpc.server import JsonLogFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    log = logging.getLogger("flight_storage")
    try:
        cluster, node, workers = _topology(args)
        config = _server_config(args, cluster, node, workers)
        keys = [k for k in (config.ticket_secret, *config.previous_ticket_secrets) if k]
        if any(len(k) < 16 for k in keys):
            raise _Refused("every ticket secret must be at least 16 bytes")
        if not config.ticket_secret:
            log.warning("no ticket secret configured: tickets are valid only for this process")
        stopping = threading.Event()
        signal.signal(signal.SIGINT, lambda _signum, _frame: stopping.set())
        signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
        server = _listen(config, workers)
        operations = (_start_operations(server, args.metrics_port, stopping, workers)
                      if args.metrics_port is not None else None)
    except _Refused as exc:
        print(f"flight-select: {exc}", file=sys.stderr)
        return 2
    print(f"listening on {server.location}", flush=True)
    if operations is not None:
        print(f"metrics listening on {operations.location}", flush=True)
    gateway = _start_s3_door(args, server, config) if args.s3_port is not None else None
    if gateway is not None:
        print(f"s3 listening on {gateway.location}", flush=True)
    while not stopping.wait(0.5):
        pass
    return _stop(server, [d for d in (gateway, workers) if d is not None], operations, log)


def _stop(server: Any, doors: list[Any], operations: Any, log: logging.Logger) -> int:
    """Stop the doors (the S3 door, a local fleet's workers), then the server, letting its
    streams finish, then the operations port (``/readyz`` says draining until the end)."""
    for door in doors:
        door.stop()
    stopped = server.stop_gracefully()
    if operations is not None:
        operations.stop()
    if not stopped:
        # a client that stopped reading keeps a gRPC write pending: leave without it (the
        # listening socket closes with the process, so no half-stopped server stays behind)
        log.warning("stopped with calls still pending; exiting")
        logging.shutdown()
        os._exit(0)
    log.info("stopped")
    return 0


def _topology(args: argparse.Namespace) -> _Topology:
    """``(cluster, node, workers)`` from ``--cluster``/``--node``/``--workers`` (``--workers``
    above 1 prepares a local fleet and points ``args.ticket_secret_file`` at its secret)."""
    from flight_storage.storage.cluster import ClusterDescription, ClusterFileError

    try:
        cluster = ClusterDescription.load(args.cluster) if args.cluster is not None else None
        node = cluster.node(args.node or "") if cluster is not None else None
    except ClusterFileError as exc:
        raise _Refused(str(exc)) from None
    if node is None and args.node is not None:
        raise _Refused("--node needs --cluster FILE")
    workers = None
    if args.workers > 1:
        if cluster is not None:
            raise _Refused("--workers makes a fleet of its own; use it without --cluster")
        from flight_storage import workers as local_fleet

        scheme = "grpc+tls" if args.tls_cert is not None else "grpc"
        workers = local_fleet.prepare(args.workers, args.host or "127.0.0.1",
                                      args.port if args.port is not None else 8815, scheme,
                                      args.ticket_secret_file)
        cluster = ClusterDescription.load(workers.fleet_file)
        node = cluster.node("w0")
        args.ticket_secret_file = workers.secret_file
    elif args.workers < 1:
        raise _Refused("--workers must be at least 1")
    return cluster, node, workers


def _server_config(args: argparse.Namespace, cluster: ClusterDescription | None,
                   node: ClusterNode | None, workers: Workers | None) -> ServerConfig:
    from flight_storage.execution.plan_types import EngineConfig
    from flight_storage.formats.csv_sniff import TableReading
    from flight_storage.rpc.config import ServerConfig
    from flight_storage.storage.s3_store import S3Settings

    return ServerConfig(
        data=tuple(args.data),
        iceberg=tuple(args.iceberg),
        store=S3Settings(endpoint_url=args.store_endpoint_url, region=args.store_region,
                         profile=args.store_profile, cache_bytes=args.store_cache_mb << 20,
                         cache_dir=args.store_cache_dir,
                         **({"max_attempts": args.store_max_attempts}
                            if args.store_max_attempts is not None else {})),
        host=args.host or (node.bind_host if node is not None else "127.0.0.1"),
        port=(node.port if workers is not None and node is not None
              else args.port if args.port is not None
              else node.port if node is not None else 8815),
        cluster=cluster,
        node_name=node.name if node is not None else None,
        ticket_secret=_ticket_secret(args.ticket_secret_file),
        previous_ticket_secrets=tuple(_ticket_secret(path)
                                      for path in args.previous_ticket_secret_file),
        ticket_max_age_s=args.ticket_max_age,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        users_file=args.auth,
        allow_anonymous=args.allow_anonymous,
        token_ttl_s=args.token_ttl,
        max_concurrent_queries=args.max_concurrent_queries,
        queue_wait_s=args.queue_wait,
        max_open_streams=args.max_open_streams,
        idle_timeout_s=args.idle_timeout,
        max_parameter_bytes=args.max_parameter_bytes,
        writable=args.writable,
        default_catalog=args.default_catalog,
        max_ingest_bytes=args.max_ingest_mb << 20,
        max_abort_marks=args.max_abort_marks,
        query_timeout_s=args.query_timeout,
        keepalive_s=args.keepalive,
        shutdown_grace_s=args.shutdown_grace,
        reading=TableReading(sniff=args.sniff, sample_bytes=args.sniff_kb << 10,
                             bad_values=args.bad_values),
        engine=EngineConfig(
            partition_bytes=args.partition_mb << 20,
            endpoint_min_bytes=args.endpoint_min_mb << 20,
            max_parallelism=args.max_parallelism,
            memory_limit_bytes=args.memory_limit_mb << 20,
            max_query_chars=args.max_query_chars,
            max_record_bytes=args.max_record_kb << 10,
            max_columns=args.max_columns,
            cores=args.engine_cores,
            engine_workers=args.engine_workers,
            cache_dir=str(args.cache_dir) if args.cache_dir is not None else None,
            cache_bytes=args.cache_mb << 20,
        ),
    )


def _listen(config: ServerConfig, workers: Workers | None) -> StorageServer:
    """The started server (and the local fleet's workers, when there are)."""
    from flight_storage.rpc.auth import UsersFileError
    from flight_storage.rpc.config import ConfigError
    from flight_storage.rpc.server import StorageServer

    try:
        server = StorageServer(config)  # serving from here on
    except (ConfigError, UsersFileError, OSError, StorageError) as exc:
        raise _Refused(str(exc)) from None
    except pa.ArrowException as exc:  # gRPC could not bind: pyarrow says only that
        raise _Refused(f"could not listen on {config.host}:{config.port} (is the port "
                       f"in use, or the address not this machine's?): {exc}") from None
    if config.writable:  # what a crashed ingest left is swept now and then
        from flight_storage.rpc.ingest import start_sweeper

        start_sweeper(server.catalog, config)
    if workers is not None:
        try:
            workers.start(sys.argv[2:], config.host)
        except OSError as exc:
            workers.stop()
            server.stop_gracefully(0)
            raise _Refused(f"--workers: {exc}") from None
        server.role.check_peers()  # they listen now: list them first from the start
    return server


def _start_operations(server: Any, port: int, stopping: threading.Event,
                      workers: Workers | None) -> Any:
    """The operations port (metrics, probes) of ``server``; ``/readyz`` turns false as soon as
    ``stopping`` is set (SIGTERM), while running streams still finish; with ``--workers``
    its ``/metrics`` has every process's figures (``rpc/roles/fleet_metrics.py``)."""
    from flight_storage import telemetry
    from flight_storage.rpc.operations_http import OperationsServer, Readiness
    from flight_storage.rpc.roles.fleet_metrics import WorkerMetrics, fleet_registry
    from flight_storage.storage.reachability import unreachable

    telemetry.track(telemetry.OPEN_STREAMS, lambda: server.streams.open_streams)
    telemetry.track(telemetry.SLOTS_IN_USE, lambda: server.streams.computing)
    telemetry.track(telemetry.SLOTS_WAITING, lambda: server.streams.waiting)
    if server.engine.decoded is not None:
        telemetry.watch_decoded_cache(server.engine.decoded.stats)
    readiness = Readiness(stopping, lambda: unreachable(server.catalog, server.iceberg))
    try:
        registry = (fleet_registry("w0", [WorkerMetrics(*w) for w in workers.metrics_urls(
            server.config.host)]) if workers is not None else None)
        return OperationsServer(server.config.host, port, readiness, registry)
    except OSError as exc:
        server.stop_gracefully(0)
        raise _Refused(f"cannot serve --metrics-port {port}: {exc.strerror or exc}") from None


def _start_s3_door(args: argparse.Namespace, server: Any, config: Any) -> Any:
    """Start the S3 door next to ``server``; exits the process if it cannot listen."""
    from flight_storage.rpc.s3_http.gateway import S3Gateway

    door = S3DoorConfig(
        host=args.s3_host, port=args.s3_port, writable=args.s3_writable,
        max_request_bytes=args.s3_max_request_kb << 10,
        max_object_bytes=args.s3_max_object_mb << 20,
        max_upload_bytes=args.s3_max_upload_mb << 20, staging_bytes=args.s3_staging_mb << 20,
        max_uploads=args.s3_max_uploads, upload_expiry_s=args.s3_upload_expiry,
        staging_dir=args.s3_staging_dir, body_timeout_s=args.s3_body_timeout,
        header_timeout_s=args.s3_header_timeout, max_connections=args.s3_max_connections,
        flavor=args.s3_flavor,
    )
    problem = door.refusal(authenticated=config.users_file is not None,
                           allow_anonymous=config.allow_anonymous,
                           mutual_tls=config.tls_client_ca is not None)
    try:
        if problem is not None:
            raise OSError(problem)
        return S3Gateway(server, door)
    except OSError as exc:
        print(f"flight-select: S3 door: {exc}", file=sys.stderr, flush=True)
        server.stop_gracefully(0)
        os._exit(2)


def _query(args: argparse.Namespace) -> int:
    from flight_storage.execution.engine import InputSpec, SelectEngine
    from flight_storage.execution.select_local import serialized_records
    from flight_storage.storage.sources import BytesSource, FileSource
    from select_dialect.errors import SelectDialectError

    try:
        if args.file == "-":
            source: Any = BytesSource(sys.stdin.buffer.read(), "<stdin>")
            guessed: tuple[str | None, str, bool] = ("csv", "NONE", True)
        else:
            from flight_storage.storage.catalog import describe_key

            path = Path(args.file)
            source = FileSource(path, str(path), path.stat().st_size)
            guessed = describe_key(path.name)
        fmt, compression, json_lines = guessed
        spec = InputSpec.from_request(
            args.input_serialization,
            default_format=fmt or "csv",
            default_compression=compression,
            json_lines=json_lines,
        )
        engine = SelectEngine()
        plan = engine.plan(args.expression, source, spec, flavor=args.flavor,
                           scan_range=args.scan_range)
        out = sys.stdout.buffer
        for chunk in serialized_records(engine, plan, args.output_serialization):
            out.write(chunk)
        out.flush()
    except (StorageError, SelectDialectError) as exc:
        detail = ""
        if getattr(exc, "line", None) is not None:
            detail = f" (line {exc.line}, column {exc.column})"
        print(f"{exc.code}: {exc.message}{detail}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"NoSuchKey: {exc.filename}: no such file", file=sys.stderr)
        return 2
    except IsADirectoryError as exc:
        print(f"InvalidRequest: {exc.filename} is a directory; name an object file",
              file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"InvalidRequest: {exc.filename or args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


def _cluster(args: argparse.Namespace) -> int:
    from flight_storage.rpc.roles.status import cluster_status, format_status
    from flight_storage.storage.cluster import ClusterDescription, ClusterFileError

    try:
        cluster = ClusterDescription.load(args.cluster)
    except ClusterFileError as exc:
        print(f"flight-select: {exc}", file=sys.stderr)
        return 2
    password = os.environ.get("FLIGHT_SELECT_PASSWORD", "") if args.user else None
    nodes = cluster_status(cluster, args.user, password)
    print(json.dumps(nodes, indent=2) if args.json else format_status(nodes))
    if not all(n["up"] for n in nodes):
        return 1  # a node is down
    refused = any(n.get("error") for n in nodes)  # up, but the credentials were refused
    return 2 if refused else 0


def _cache(args: argparse.Namespace) -> int:
    import pyarrow.flight as flight

    from flight_storage.rpc.cache_status import cache_status, format_cache_status

    password = os.environ.get("FLIGHT_SELECT_PASSWORD", "") if args.user else None
    roots = args.tls_root_certs.read_bytes() if args.tls_root_certs else None
    try:
        stats = cache_status(args.location, args.user, password, roots)
    except (flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError) as exc:
        print(f"flight-select: {args.location} refused the credentials ({_first_line(exc)}); "
              "pass --user with $FLIGHT_SELECT_PASSWORD", file=sys.stderr)
        return 2
    except flight.FlightError as exc:
        print(f"flight-select: {args.location} did not answer ({_first_line(exc)})",
              file=sys.stderr)
        return 1
    print(json.dumps(stats, indent=2) if args.json else format_cache_status(stats))
    return 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _add_user(args: argparse.Namespace) -> int:
    return run_add_user(args)


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": _serve,
    "query": _query,
    "add-user": _add_user,
    "cluster": _cluster,
    "cache": _cache,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``flight-select`` console script."""
    args = _build_parser().parse_args(argv)
    status = _COMMANDS[args.command](args)
    if args.command == "query" and argv is None:
        # As a process of its own, leave without running interpreter teardown: DataFusion's
        # runtime threads could abort it ("terminate called without an active exception")
        # after the result was printed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
