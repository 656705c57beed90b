"""Deterministic generator for the retail sample data and larger benchmark data.

Two modes share the same record generators and file writers:

* ``--samples`` writes the small, committed sample set (``data/samples``): bucket ``sales``
  with monthly order CSVs, a header-less CSV, NDJSON events, a JSON document, a Parquet file
  and compressed CSV variants, plus an empty bucket ``tpch``.
* otherwise it writes ``--rows N`` (or about ``--size-mb M`` of orders CSV) records per
  format under ``--out`` (default ``data/generated``), streaming so memory stays bounded.

Every random choice comes from a ``random.Random`` seeded with a string built from the seed
and the file's role, so the output is the same bytes on every run for a given seed and
adding a format never changes another file.

Example:
    ``python -m data.generate --rows 100000 --formats csv,parquet --seed 7``

"""

from __future__ import annotations

import argparse
import bz2
import csv
import gzip
import io
import itertools
import json
import math
import random
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import BinaryIO, NamedTuple, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

SAMPLE_SEED = 20240101
"""Seed of the committed sample set."""

DEFAULT_SEED = 42
DEFAULT_ROWS = 50_000
SAMPLE_ROWS_PER_MONTH = 2_000
SAMPLE_NOHEADER_ROWS = 300
SAMPLE_EVENT_ROWS = 600
SAMPLE_ROW_GROUP_SIZE = 500
GENERATED_ROW_GROUP_SIZE = 50_000

ORDER_COLUMNS: tuple[str, ...] = (
    "order_id",
    "customer_id",
    "region",
    "product",
    "quantity",
    "unit_price",
    "order_ts",
    "status",
    "note",
)
"""Header of every orders CSV (the Parquet file adds the bool column ``paid``)."""

ORDERS_PARQUET_SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("customer_id", pa.int64()),
        pa.field("region", pa.string()),
        pa.field("product", pa.string()),
        pa.field("quantity", pa.int64()),
        pa.field("unit_price", pa.float64()),
        pa.field("order_ts", pa.timestamp("us", tz="UTC")),
        pa.field("status", pa.string()),
        pa.field("note", pa.string()),
        pa.field("paid", pa.bool_(), nullable=False),
    ]
)

_ORDER_MONTHS: tuple[str, ...] = ("2024-01", "2024-02", "2024-03")

# (sku, name, category, base price). Names carry commas, quotes and multi-byte UTF-8 on
# purpose; the voucher has a negative price.
_PRODUCTS: tuple[tuple[str, str, str, float], ...] = (
    ("SKU-001", "Espresso beans 1kg", "coffee", 18.50),
    ("SKU-002", "Café crème capsules", "coffee", 6.20),
    ("SKU-003", "Müsli, nutty", "breakfast", 4.75),
    ("SKU-004", "Crème brûlée kit", "dessert", 12.00),
    ("SKU-005", "抹茶 matcha 100g", "tea", 15.90),
    ("SKU-006", "Smørrebrød board", "kitchen", 29.00),
    ("SKU-007", 'Teapot "Classic"', "kitchen", 34.99),
    ("SKU-008", "Earl Grey tea", "tea", 7.40),
    ("SKU-009", "Jalapeño sauce", "pantry", 3.95),
    ("SKU-010", "Gift card", "gift", 25.00),
    ("SKU-011", "Discount voucher", "gift", -5.00),
    ("SKU-012", "Ceramic mug 350ml", "kitchen", 9.90),
)

_REGIONS: tuple[str | None, ...] = (
    "north", "south", "east", "west", "north", "south", "Zürich", "São Paulo", "東京", None,
)  # fmt: skip

# (status, relative weight); "returned" rows carry a negative quantity.
_STATUSES: tuple[tuple[str, int], ...] = (
    ("delivered", 45),
    ("shipped", 25),
    ("pending", 15),
    ("cancelled", 8),
    ("returned", 7),
)
_UNPAID_STATUSES = frozenset({"pending", "cancelled"})

_NOTES: tuple[str, ...] = (
    "Leave at the door, please",
    'Customer said "urgent"',
    'Gift wrap, ribbon "red", card included',
    "Größe M — bitte prüfen",
    "Call before delivery; gate code 1234",
    "配達前に電話してください",
    'Refund requested, "damaged box"',
    "🎁 birthday present",
    "fragile",
    'He said: "it\'s fine, really"',
)

# (suffix, offset in minutes, relative weight): mixed zones in the timestamp text.
_ZONES: tuple[tuple[str, int, int], ...] = (
    ("Z", 0, 50),
    ("+02:00", 120, 15),
    ("-07:45", -465, 10),
    ("+05:30", 330, 10),
    ("-05:00", -300, 10),
    ("+00:00", 0, 5),
)

_USER_NAMES: tuple[str, ...] = (
    "Zoë", "José", "Łukasz", "Ånne", "Chloé", "Søren", "Ngozi",
    "李娜", "محمد", "Αλέξης", "Ольга", "Mia", "O'Brien", "Nguyễn",
)  # fmt: skip
_COUNTRIES: tuple[str, ...] = ("DE", "FR", "CH", "BR", "JP", "US", "IN", "NO", "PL", "GR")
_EVENT_TYPES: tuple[tuple[str, int], ...] = (
    ("view", 50),
    ("add_to_cart", 25),
    ("purchase", 18),
    ("refund", 7),
)
_DEVICES: tuple[tuple[str, int], ...] = (
    ("ios", 17),
    ("android", 14),
    ("windows", 11),
    ("macos", 14),
)
_COUPONS: tuple[str, ...] = ("WINTER10", "FREESHIP", "VIP-20")
_REFERRERS: tuple[str | None, ...] = (None, "https://example.com/?q=tea&lang=de", "newsletter")


class Order(NamedTuple):
    """One order row, with the timestamp both as written text and as UTC microseconds."""

    order_id: int
    customer_id: int | None
    region: str | None
    product: str
    quantity: int
    unit_price: str | None
    order_ts: str
    order_ts_us: int
    status: str
    note: str | None

    def csv_fields(self) -> list[str]:
        """The row as CSV fields; NULL becomes an empty field."""
        values = (
            self.order_id, self.customer_id, self.region, self.product, self.quantity,
            self.unit_price, self.order_ts, self.status, self.note,
        )  # fmt: skip
        return ["" if value is None else str(value) for value in values]


@dataclass(frozen=True)
class TimeWindow:
    """A half-open interval of UTC epoch seconds from which timestamps are drawn."""

    start: int
    end: int

    @classmethod
    def month(cls, month: str) -> TimeWindow:
        """The window of one calendar month given as ``YYYY-MM``."""
        year, mon = (int(part) for part in month.split("-"))
        start = datetime(year, mon, 1, tzinfo=UTC)
        end = datetime(year + mon // 12, mon % 12 + 1, 1, tzinfo=UTC)
        return cls(int(start.timestamp()), int(end.timestamp()))

    @classmethod
    def year(cls, year: int) -> TimeWindow:
        """The window of one calendar year."""
        start = datetime(year, 1, 1, tzinfo=UTC)
        end = datetime(year + 1, 1, 1, tzinfo=UTC)
        return cls(int(start.timestamp()), int(end.timestamp()))


def _rng(seed: int, role: str) -> random.Random:
    # String seeds are hashed with SHA-512 by `random`, independent of PYTHONHASHSEED.
    return random.Random(f"{seed}:{role}")


def _weighted(rng: random.Random, table: Sequence[tuple[str, int]]) -> str:
    return rng.choices([name for name, _ in table], weights=[w for _, w in table])[0]


def _timestamp(rng: random.Random, window: TimeWindow, index: int, count: int) -> tuple[str, int]:
    """Draws the ``index``-th of ``count`` ascending instants and renders it in a random zone.

    Returns:
        The timestamp text and its instant in UTC microseconds.
    """
    # Row i falls into the i-th of `count` equal slices, so instants ascend with the id (as
    # real order ids do) and Parquet row-group statistics on the timestamp are selective.
    slot_start = window.start + (window.end - window.start) * index // count
    slot_end = window.start + (window.end - window.start) * (index + 1) // count
    epoch = rng.randrange(slot_start, max(slot_end, slot_start + 1))
    millis = rng.randrange(1, 1000) if rng.random() < 0.2 else 0
    suffix, offset, _ = rng.choices(_ZONES, weights=[z[2] for z in _ZONES])[0]
    local = datetime.fromtimestamp(epoch, tz=timezone(timedelta(minutes=offset)))
    fraction = f".{millis:03d}" if millis else ""
    return f"{local:%Y-%m-%dT%H:%M:%S}{fraction}{suffix}", epoch * 1_000_000 + millis * 1_000


def iter_orders(
    seed: int, role: str, count: int, first_id: int, window: TimeWindow
) -> Iterator[Order]:
    """Yields ``count`` orders with ids from ``first_id`` and timestamps inside ``window``.

    Args:
        seed: The generator seed.
        role: Names the random stream (e.g. ``"orders:2024-01"``); equal roles give equal rows.
        count: Number of orders.
        first_id: The first ``order_id``; ids ascend by one.
        window: Where the order timestamps fall.

    Example:
        >>> next(iter_orders(1, "x", 1, 1, TimeWindow.month("2024-01"))).order_id
        1

    """
    rng = _rng(seed, role)
    for index in range(count):
        order_id = first_id + index
        _, product, _, base_price = rng.choice(_PRODUCTS)
        status = _weighted(rng, _STATUSES)
        quantity = rng.randint(1, 5) if rng.random() < 0.9 else rng.randint(6, 250)
        if status == "returned":
            quantity = -quantity
        price = base_price * (1 + rng.uniform(-0.1, 0.1))
        ts_text, ts_us = _timestamp(rng, window, index, count)
        yield Order(
            order_id=order_id,
            customer_id=None if rng.random() < 0.03 else rng.randint(1000, 4999),
            region=rng.choice(_REGIONS),
            product=product,
            quantity=quantity,
            unit_price=None if rng.random() < 0.02 else f"{price:.2f}",
            order_ts=ts_text,
            order_ts_us=ts_us,
            status=status,
            note=rng.choice(_NOTES) if rng.random() < 0.35 else None,
        )


def iter_events(
    seed: int, role: str, count: int, first_id: int, window: TimeWindow
) -> Iterator[dict[str, object]]:
    """Yields ``count`` nested shop events (user object, items array, optional keys).

    Args:
        seed: The generator seed.
        role: Names the random stream.
        count: Number of events.
        first_id: The first ``event_id``.
        window: Where the event timestamps fall.

    """
    rng = _rng(seed, role)
    for index in range(count):
        event_id = first_id + index
        kind = _weighted(rng, _EVENT_TYPES)
        ts_text, _ = _timestamp(rng, window, index, count)
        user: dict[str, object] = {
            "id": None if rng.random() < 0.05 else rng.randint(1000, 4999),
            "country": rng.choice(_COUNTRIES),
        }
        if rng.random() < 0.7:
            user["name"] = rng.choice(_USER_NAMES)
        item_count = rng.randint(1, 4) if kind in ("purchase", "refund") else 1
        lines = [(rng.choice(_PRODUCTS), rng.randint(1, 3)) for _ in range(item_count)]
        items = [{"sku": product[0], "qty": qty, "price": product[3]} for product, qty in lines]
        os_name, latest = rng.choice(_DEVICES)
        event: dict[str, object] = {
            "event_id": event_id,
            "type": kind,
            "ts": ts_text,
            "user": user,
            "items": items,
            "device": {
                "os": os_name,
                "version": [rng.randint(latest - 3, latest), rng.randint(0, 9)],
            },
            "referrer": rng.choice(_REFERRERS),
        }
        if kind in ("purchase", "refund"):
            amount = sum(qty * product[3] for product, qty in lines)
            event["amount"] = round(-amount if kind == "refund" else amount, 2)
        if rng.random() < 0.15:
            event["coupon"] = rng.choice(_COUPONS)
        if rng.random() < 0.1:
            event["tags"] = [] if rng.random() < 0.5 else ["promo", "früh"]
        yield event


def catalog_document(seed: int) -> dict[str, object]:
    """The product catalog as one JSON document (top-level object with a products array)."""
    rng = _rng(seed, "catalog")
    products = []
    for sku, name, category, price in _PRODUCTS:
        products.append(
            {
                "sku": sku,
                "name": name,
                "category": category,
                "price": price,
                "in_stock": rng.random() < 0.8,
                "tags": rng.sample(
                    ["bio", "fair-trade", "bestseller", "new", "vegan"], rng.randint(0, 3)
                ),
                "dimensions": None
                if category == "gift"
                else {
                    "w_cm": rng.randint(5, 40),
                    "h_cm": rng.randint(5, 40),
                    "weight_g": rng.randint(50, 2500),
                },
            }
        )
    return {
        "store": "Bäckerei & Café Nord",
        "currency": "EUR",
        "version": 3,
        "updated": "2024-01-01T00:00:00Z",
        "regions": [region for region in dict.fromkeys(_REGIONS) if region is not None],
        "products": products,
    }


def write_orders_csv(stream: BinaryIO, orders: Iterable[Order], *, header: bool = True) -> None:
    """Writes orders as RFC 4180 CSV (UTF-8, LF line ends, ``""`` escapes a quote)."""
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="", write_through=False)
    writer = csv.writer(text, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    if header:
        writer.writerow(ORDER_COLUMNS)
    for order in orders:
        writer.writerow(order.csv_fields())
    text.flush()
    text.detach()


def write_events_ndjson(stream: BinaryIO, events: Iterable[dict[str, object]]) -> None:
    """Writes one compact JSON object per line (UTF-8, not ASCII-escaped)."""
    for event in events:
        stream.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")


def write_json_document(stream: BinaryIO, document: object) -> None:
    """Writes one pretty-printed JSON document."""
    stream.write(json.dumps(document, ensure_ascii=False, indent=2).encode() + b"\n")


def _orders_table(orders: Sequence[Order]) -> pa.Table:
    columns = {
        "order_id": [o.order_id for o in orders],
        "customer_id": [o.customer_id for o in orders],
        "region": [o.region for o in orders],
        "product": [o.product for o in orders],
        "quantity": [o.quantity for o in orders],
        "unit_price": [None if o.unit_price is None else float(o.unit_price) for o in orders],
        "order_ts": [o.order_ts_us for o in orders],
        "status": [o.status for o in orders],
        "note": [o.note for o in orders],
        "paid": [o.status not in _UNPAID_STATUSES for o in orders],
    }
    arrays = [pa.array(columns[field.name], type=field.type) for field in ORDERS_PARQUET_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=ORDERS_PARQUET_SCHEMA)


def write_orders_parquet(stream: BinaryIO, orders: Iterable[Order], *, row_group_size: int) -> None:
    """Writes orders as Parquet, one row group per ``row_group_size`` rows, in bounded memory."""
    iterator = iter(orders)
    with pq.ParquetWriter(stream, ORDERS_PARQUET_SCHEMA, compression="snappy") as writer:
        while chunk := list(itertools.islice(iterator, row_group_size)):
            writer.write_table(_orders_table(chunk), row_group_size=row_group_size)


def _gzip_stream(raw: BinaryIO) -> BinaryIO:
    # mtime=0 and no file name keep the gzip header byte-identical across runs.
    return gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)  # type: ignore[return-value]


def _bz2_stream(raw: BinaryIO) -> BinaryIO:
    return bz2.BZ2File(raw, mode="wb")  # type: ignore[return-value]


def _zstd_stream(raw: BinaryIO) -> BinaryIO:
    return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)


COMPRESSORS: dict[str, Callable[[BinaryIO], BinaryIO]] = {
    "gz": _gzip_stream,
    "bz2": _bz2_stream,
    "zst": _zstd_stream,
}
"""File suffix -> wrapper that compresses what is written into the raw stream."""


def _compressed(payload: bytes, suffix: str) -> bytes:
    raw = io.BytesIO()
    with COMPRESSORS[suffix](raw) as stream:
        stream.write(payload)
    return raw.getvalue()


def _to_bytes(write: Callable[[BinaryIO], None]) -> bytes:
    buffer = io.BytesIO()
    write(buffer)
    return buffer.getvalue()


def sample_files(seed: int = SAMPLE_SEED) -> dict[str, bytes]:
    """Builds the whole sample set in memory: relative path -> file content.

    Args:
        seed: The seed; the committed samples use ``SAMPLE_SEED``.

    Returns:
        A mapping from paths relative to the data root (``sales/orders/2024-01.csv``, …) to bytes.

    """
    rows = SAMPLE_ROWS_PER_MONTH

    def month_orders(index: int, month: str) -> Iterator[Order]:
        return iter_orders(seed, f"orders:{month}", rows, 1 + index * rows, TimeWindow.month(month))

    def month_csv(index: int, month: str) -> bytes:
        return _to_bytes(lambda stream: write_orders_csv(stream, month_orders(index, month)))

    files: dict[str, bytes] = {}
    for index, month in enumerate(_ORDER_MONTHS):
        files[f"sales/orders/{month}.csv"] = month_csv(index, month)
    noheader = iter_orders(
        seed,
        "orders:noheader",
        SAMPLE_NOHEADER_ROWS,
        1 + len(_ORDER_MONTHS) * rows,
        TimeWindow.month("2024-04"),
    )
    files["sales/orders_noheader.csv"] = _to_bytes(
        lambda s: write_orders_csv(s, noheader, header=False)
    )
    events = iter_events(seed, "events:2024-01", SAMPLE_EVENT_ROWS, 1, TimeWindow.month("2024-01"))
    files["sales/events/2024-01.ndjson"] = _to_bytes(lambda s: write_events_ndjson(s, events))
    files["sales/events/catalog.json"] = _to_bytes(
        lambda s: write_json_document(s, catalog_document(seed))
    )
    all_orders = itertools.chain.from_iterable(
        month_orders(i, m) for i, m in enumerate(_ORDER_MONTHS)
    )
    files["sales/parquet/orders.parquet"] = _to_bytes(
        lambda s: write_orders_parquet(s, all_orders, row_group_size=SAMPLE_ROW_GROUP_SIZE)
    )
    january = files[f"sales/orders/{_ORDER_MONTHS[0]}.csv"]
    for suffix in COMPRESSORS:
        files[f"sales/compressed/orders-{_ORDER_MONTHS[0]}.csv.{suffix}"] = _compressed(
            january, suffix
        )
    files["sales/.flight-select.json"] = _bucket_config()
    files["tpch/.keep"] = b""
    return files


def _bucket_config() -> bytes:
    """The sales bucket's table configuration (see flight_storage.storage.catalog)."""
    header = {"CSV": {"FileHeaderInfo": "USE"}}
    config = {
        "tables": [
            {"prefix": "orders/", "InputSerialization": header},
            {"prefix": "compressed/", "InputSerialization": header},
        ]
    }
    return (json.dumps(config, indent=2) + "\n").encode()


def write_samples(out: Path, seed: int = SAMPLE_SEED) -> list[Path]:
    """Writes the sample set under ``out``; returns the written paths."""
    written = []
    for relative, content in sample_files(seed).items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written.append(path)
    return written


Progress = Callable[[str], None]
_T = TypeVar("_T")


def _tracked(
    items: Iterable[_T], total: int, label: str, progress: Progress | None
) -> Iterator[_T]:
    """Passes items through, reporting each further ~10% of ``total`` to ``progress``."""
    step = max(1, math.ceil(total / 10))
    for count, item in enumerate(items, start=1):
        yield item
        if progress is not None and (count % step == 0 or count == total):
            progress(f"{label}: {count}/{total} rows ({100 * count // max(total, 1)}%)")


@dataclass(frozen=True)
class GenerateConfig:
    """What to generate outside sample mode.

    Attributes:
        out: Data root to write into (buckets become its top-level folders).
        rows: Records per format.
        seed: Generator seed.
        formats: Names from ``FORMATS``.
        row_group_size: Parquet rows per row group.

    """

    out: Path
    rows: int
    seed: int = DEFAULT_SEED
    formats: tuple[str, ...] = ("csv", "ndjson", "parquet")
    row_group_size: int = GENERATED_ROW_GROUP_SIZE


def _generated_orders(
    config: GenerateConfig, label: str, progress: Progress | None
) -> Iterator[Order]:
    # The same role for every format: the CSV, compressed and Parquet files hold the same rows.
    orders = iter_orders(config.seed, "generated:orders", config.rows, 1, TimeWindow.year(2024))
    return _tracked(orders, config.rows, label, progress)


def _write_csv(
    config: GenerateConfig, raw: BinaryIO, label: str, progress: Progress | None
) -> None:
    write_orders_csv(raw, _generated_orders(config, label, progress))


def _write_ndjson(
    config: GenerateConfig, raw: BinaryIO, label: str, progress: Progress | None
) -> None:
    events = iter_events(config.seed, "generated:events", config.rows, 1, TimeWindow.year(2024))
    write_events_ndjson(raw, _tracked(events, config.rows, label, progress))


def _write_parquet(
    config: GenerateConfig, raw: BinaryIO, label: str, progress: Progress | None
) -> None:
    write_orders_parquet(
        raw, _generated_orders(config, label, progress), row_group_size=config.row_group_size
    )


def _compressed_csv_writer(
    suffix: str,
) -> Callable[[GenerateConfig, BinaryIO, str, Progress | None], None]:
    def write(config: GenerateConfig, raw: BinaryIO, label: str, progress: Progress | None) -> None:
        with COMPRESSORS[suffix](raw) as stream:
            _write_csv(config, stream, label, progress)

    return write


FORMATS: dict[str, tuple[str, Callable[[GenerateConfig, BinaryIO, str, Progress | None], None]]] = {
    "csv": ("sales/orders/orders.csv", _write_csv),
    "ndjson": ("sales/events/events.ndjson", _write_ndjson),
    "parquet": ("sales/parquet/orders.parquet", _write_parquet),
    **{
        f"csv.{suffix}": (f"sales/compressed/orders.csv.{suffix}", _compressed_csv_writer(suffix))
        for suffix in COMPRESSORS
    },
}
"""Format name -> (path under the data root, streaming writer)."""


def generate(config: GenerateConfig, progress: Progress | None = None) -> list[Path]:
    """Writes ``config.rows`` records per requested format under ``config.out``, streaming.

    Args:
        config: What to write.
        progress: Receives a line roughly every 10% of each file.

    Returns:
        The written paths, in ``config.formats`` order.

    Raises:
        ValueError: On an unknown format name.

    """
    unknown = sorted(set(config.formats) - FORMATS.keys())
    if unknown:
        raise ValueError(f"unknown format(s) {unknown}; choose from {sorted(FORMATS)}")
    written = []
    for name in config.formats:
        relative, write = FORMATS[name]
        path = config.out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as raw:
            write(config, raw, relative, progress)
        written.append(path)
    (config.out / "tpch").mkdir(parents=True, exist_ok=True)
    return written


def rows_for_size(size_mb: float, seed: int) -> int:
    """Rows that make the orders CSV about ``size_mb`` MiB, estimated from 1,000 rows."""
    probe = 1_000
    sample = _to_bytes(
        lambda s: write_orders_csv(
            s, iter_orders(seed, "generated:orders", probe, 1, TimeWindow.year(2024))
        )
    )
    return max(1, round(size_mb * 1024 * 1024 * probe / len(sample)))


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m data.generate", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--out", type=Path, help="data root (default data/generated, or data/samples)"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--rows", type=int, help=f"records per format (default {DEFAULT_ROWS})")
    size.add_argument("--size-mb", type=float, help="size the orders CSV to about this many MiB")
    parser.add_argument(
        "--seed", type=int, help=f"seed (default {DEFAULT_SEED}; samples {SAMPLE_SEED})"
    )
    parser.add_argument(
        "--formats", default="csv,ndjson,parquet", help=f"comma list of {','.join(FORMATS)}"
    )
    parser.add_argument("--samples", action="store_true", help="rewrite the committed sample set")
    args = parser.parse_args(argv)
    if args.samples and (args.rows is not None or args.size_mb is not None):
        parser.error("--samples has a fixed size; drop --rows/--size-mb")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; see the module docstring."""
    args = _parse_args(argv)
    here = Path(__file__).resolve().parent

    def report(line: str) -> None:
        sys.stderr.write(line + "\n")

    if args.samples:
        out = args.out or here / "samples"
        written = write_samples(out, SAMPLE_SEED if args.seed is None else args.seed)
        report(f"wrote {len(written)} sample files under {out}")
        return 0
    seed = DEFAULT_SEED if args.seed is None else args.seed
    rows = args.rows if args.rows is not None else DEFAULT_ROWS
    if args.size_mb is not None:
        rows = rows_for_size(args.size_mb, seed)
    config = GenerateConfig(
        out=args.out or here / "generated",
        rows=rows,
        seed=seed,
        formats=tuple(name.strip() for name in args.formats.split(",") if name.strip()),
    )
    try:
        written = generate(config, progress=report)
    except ValueError as error:
        report(f"error: {error}")
        return 2
    report(f"wrote {len(written)} files ({rows} rows each) under {config.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
