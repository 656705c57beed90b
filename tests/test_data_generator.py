"""Tests of the sample data set and its deterministic generator (data/generate.py)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
import zstandard

from data import generate

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "samples"
MONTHS = ("2024-01", "2024-02", "2024-03")
REGENERATE_HINT = "samples are stale: run `python -m data.generate --samples`"


@pytest.fixture(scope="module")
def regenerated() -> dict[str, bytes]:
    return generate.sample_files()


def _csv(path: Path, *, header: bool = True) -> pa.Table:
    read = pacsv.ReadOptions(column_names=None if header else list(generate.ORDER_COLUMNS))
    # All text, and an empty field is NULL (the s3object convention for CSV).
    convert = pacsv.ConvertOptions(
        column_types={name: pa.string() for name in generate.ORDER_COLUMNS},
        strings_can_be_null=True,
    )
    return pacsv.read_csv(path, read_options=read, convert_options=convert)


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "data.generate", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# --- determinism and the committed set ------------------------------------------------------


def test_committed_samples_equal_regeneration(regenerated: dict[str, bytes]) -> None:
    on_disk = _tree(SAMPLES)
    assert sorted(on_disk) == sorted(regenerated), REGENERATE_HINT
    for relative, content in regenerated.items():
        assert on_disk[relative] == content, f"{relative}: {REGENERATE_HINT}"


def test_sample_set_is_small() -> None:
    assert sum(len(content) for content in _tree(SAMPLES).values()) < 2 * 1024 * 1024


def test_samples_cli_writes_identical_bytes(tmp_path: Path, regenerated: dict[str, bytes]) -> None:
    _run_cli("--samples", "--out", str(tmp_path))
    assert _tree(tmp_path) == regenerated


def test_sample_seed_changes_content(regenerated: dict[str, bytes]) -> None:
    other = generate.sample_files(seed=generate.SAMPLE_SEED + 1)
    assert other.keys() == regenerated.keys()
    assert other["sales/orders/2024-01.csv"] != regenerated["sales/orders/2024-01.csv"]


def test_generate_is_deterministic_per_seed(tmp_path: Path) -> None:
    formats = ",".join(generate.FORMATS)
    runs = {}
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        _run_cli(
            "--out", str(tmp_path / name), "--rows", "1200", "--seed", seed, "--formats", formats
        )
        runs[name] = _tree(tmp_path / name)
    assert runs["a"] == runs["b"]
    assert len(runs["a"]) == len(generate.FORMATS)
    assert all(runs["a"][key] != runs["c"][key] for key in runs["a"])


# --- generated (larger) data ----------------------------------------------------------------


def test_generate_formats_hold_the_same_orders(tmp_path: Path) -> None:
    config = generate.GenerateConfig(out=tmp_path, rows=1_234, seed=9, row_group_size=300,
                                     formats=tuple(generate.FORMATS))  # fmt: skip
    generate.generate(config)
    csv_bytes = (tmp_path / "sales/orders/orders.csv").read_bytes()
    table = _csv(tmp_path / "sales/orders/orders.csv")
    parquet = pq.ParquetFile(tmp_path / "sales/parquet/orders.parquet")
    assert table.num_rows == parquet.metadata.num_rows == 1_234
    assert parquet.metadata.num_row_groups == 5
    assert parquet.read().column("order_id").to_pylist() == [
        int(v) for v in table.column("order_id").to_pylist()
    ]
    events = (tmp_path / "sales/events/events.ndjson").read_bytes().splitlines()
    assert len(events) == 1_234
    assert gzip.decompress((tmp_path / "sales/compressed/orders.csv.gz").read_bytes()) == csv_bytes
    assert bz2.decompress((tmp_path / "sales/compressed/orders.csv.bz2").read_bytes()) == csv_bytes
    zst = (tmp_path / "sales/compressed/orders.csv.zst").read_bytes()
    assert zstandard.ZstdDecompressor().stream_reader(io.BytesIO(zst)).read() == csv_bytes


def test_generate_reports_progress_every_tenth(tmp_path: Path) -> None:
    lines: list[str] = []
    config = generate.GenerateConfig(out=tmp_path, rows=1_000, formats=("csv",))
    generate.generate(config, progress=lines.append)
    assert len(lines) == 10
    assert lines[-1] == "sales/orders/orders.csv: 1000/1000 rows (100%)"


def test_cli_progress_goes_to_stderr(tmp_path: Path) -> None:
    result = _run_cli("--out", str(tmp_path), "--rows", "500", "--formats", "csv")
    assert result.stdout == ""
    assert "50%" in result.stderr
    assert "100%" in result.stderr


def test_size_mb_sizes_the_orders_csv(tmp_path: Path) -> None:
    _run_cli("--out", str(tmp_path), "--size-mb", "1", "--formats", "csv")
    size = (tmp_path / "sales/orders/orders.csv").stat().st_size
    assert 0.9 * 1024 * 1024 < size < 1.1 * 1024 * 1024


def test_unknown_format_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown format"):
        generate.generate(generate.GenerateConfig(out=tmp_path, rows=1, formats=("xml",)))


# --- schema and quirks of each sample -------------------------------------------------------


@pytest.mark.parametrize("month", MONTHS)
def test_monthly_csv_schema(month: str) -> None:
    table = _csv(SAMPLES / f"sales/orders/{month}.csv")
    assert table.column_names == list(generate.ORDER_COLUMNS)
    assert table.num_rows == generate.SAMPLE_ROWS_PER_MONTH
    first_id = 1 + MONTHS.index(month) * generate.SAMPLE_ROWS_PER_MONTH
    ids = [int(v) for v in table.column("order_id").to_pylist()]
    assert ids == list(range(first_id, first_id + generate.SAMPLE_ROWS_PER_MONTH))
    for text in table.column("order_ts").to_pylist():
        stamp = datetime.fromisoformat(text)
        assert stamp.tzinfo is not None


def test_csv_sample_quirks() -> None:
    raw = (SAMPLES / "sales/orders/2024-01.csv").read_text(encoding="utf-8")
    table = _csv(SAMPLES / "sales/orders/2024-01.csv")
    notes = [n for n in table.column("note").to_pylist() if n is not None]
    assert any("," in n and '"' in n for n in notes), "a note with a comma and a quote"
    assert '""' in raw, "quotes are escaped by doubling"
    for column in ("customer_id", "region", "unit_price", "note"):
        assert table.column(column).null_count > 0, f"empty fields in {column}"
    stamps = table.column("order_ts").to_pylist()
    for suffix in ("Z", "+02:00", "-07:45"):
        assert any(s.endswith(suffix) for s in stamps), suffix
    assert any("." in s for s in stamps), "fractional seconds"
    assert any(int(q) < 0 for q in table.column("quantity").to_pylist())
    assert any(p is not None and float(p) < 0 for p in table.column("unit_price").to_pylist())
    values = table.column("region").to_pylist() + table.column("product").to_pylist()
    assert any(v is not None and len(v.encode()) > len(v) for v in values), "multi-byte UTF-8"


def test_noheader_csv() -> None:
    raw = (SAMPLES / "sales/orders_noheader.csv").read_bytes()
    assert not raw.startswith(b"order_id")
    table = _csv(SAMPLES / "sales/orders_noheader.csv", header=False)
    assert table.num_rows == generate.SAMPLE_NOHEADER_ROWS
    assert table.num_columns == len(generate.ORDER_COLUMNS)


def test_events_ndjson() -> None:
    path = SAMPLES / "sales/events/2024-01.ndjson"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == generate.SAMPLE_EVENT_ROWS
    events = [json.loads(line) for line in lines]
    for event in events:
        assert {"event_id", "type", "ts", "user", "items"} <= event.keys()
        assert isinstance(event["user"], dict)
        assert "country" in event["user"]
        assert event["items"]
        assert all(
            {"sku", "qty", "price"} <= item.keys() for item in event["items"]
        )
        assert datetime.fromisoformat(event["ts"]).tzinfo is not None
    assert any("coupon" in e for e in events)
    assert any("coupon" not in e for e in events)
    assert any(e["user"]["id"] is None for e in events)
    assert any("name" not in e["user"] for e in events)
    assert any(len(e["items"]) > 1 for e in events)
    assert any(e.get("tags") == [] for e in events)
    assert any(e.get("amount", 0) < 0 for e in events)
    table = pajson.read_json(path)
    assert table.num_rows == len(events)
    assert pa.types.is_struct(table.schema.field("user").type)
    assert pa.types.is_list(table.schema.field("items").type)


def test_catalog_is_a_pretty_json_document() -> None:
    text = (SAMPLES / "sales/events/catalog.json").read_text(encoding="utf-8")
    assert len(text.splitlines()) > 10
    assert text.startswith("{\n  ")
    document = json.loads(text)
    skus = [product["sku"] for product in document["products"]]
    assert len(skus) == len(set(skus)) >= 10
    assert any(p["dimensions"] is None for p in document["products"])
    assert all(isinstance(p["in_stock"], bool) for p in document["products"])


def test_parquet_sample_types_and_row_groups() -> None:
    parquet = pq.ParquetFile(SAMPLES / "sales/parquet/orders.parquet")
    schema = parquet.schema_arrow
    assert schema == generate.ORDERS_PARQUET_SCHEMA
    assert schema.field("order_ts").type == pa.timestamp("us", tz="UTC")
    assert {str(f.type) for f in schema} >= {
        "int64",
        "string",
        "double",
        "timestamp[us, tz=UTC]",
        "bool",
    }
    assert parquet.metadata.num_rows == len(MONTHS) * generate.SAMPLE_ROWS_PER_MONTH
    assert (
        parquet.metadata.num_row_groups
        == parquet.metadata.num_rows // generate.SAMPLE_ROW_GROUP_SIZE
    )


def test_parquet_sample_matches_monthly_csvs() -> None:
    parquet = pq.read_table(SAMPLES / "sales/parquet/orders.parquet")
    csv_rows = pa.concat_tables(_csv(SAMPLES / f"sales/orders/{month}.csv") for month in MONTHS)
    assert parquet.column("order_id").to_pylist() == [
        int(v) for v in csv_rows.column("order_id").to_pylist()
    ]
    for name in ("region", "product", "status", "note"):
        assert parquet.column(name).to_pylist() == csv_rows.column(name).to_pylist(), name
    prices = [None if p is None else float(p) for p in csv_rows.column("unit_price").to_pylist()]
    assert parquet.column("unit_price").to_pylist() == prices
    instants = [datetime.fromisoformat(t) for t in csv_rows.column("order_ts").to_pylist()]
    assert parquet.column("order_ts").to_pylist() == instants
    paid = parquet.column("paid").to_pylist()
    statuses = parquet.column("status").to_pylist()
    assert paid == [s not in ("pending", "cancelled") for s in statuses]


@pytest.mark.parametrize(
    ("suffix", "decompress"),
    [
        ("gz", gzip.decompress),
        ("bz2", bz2.decompress),
        ("zst", lambda data: zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()),
    ],
)
def test_compressed_variants_decompress_to_plain_csv(suffix: str, decompress: object) -> None:
    plain = (SAMPLES / "sales/orders/2024-01.csv").read_bytes()
    packed = (SAMPLES / f"sales/compressed/orders-2024-01.csv.{suffix}").read_bytes()
    assert packed != plain
    assert decompress(packed) == plain  # type: ignore[operator]


def test_tpch_bucket_is_present_and_empty() -> None:
    assert [p.name for p in (SAMPLES / "tpch").iterdir()] == [".keep"]
