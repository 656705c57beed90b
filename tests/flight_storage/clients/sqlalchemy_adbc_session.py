"""Use SQLAlchemy through sqlalchemy-adbc's Flight SQL dialect against a server; print JSON.

Run with the clients' venv (``.venv-clients/``, made by ``scripts/setup.sh``), never the
project's: sqlalchemy-adbc needs SQLAlchemy >= 2 while flightsql-dbapi, in the project's venv,
pins SQLAlchemy < 2. It imports nothing of ours: it reaches the server through the ADBC Flight
SQL driver only, as any foreign client does. Usage::

    sqlalchemy_adbc_session.py HOST PORT BUCKET PREFIX_TABLE OBJECT_TABLE

Prints one JSON document: one entry per step (reflection, Core selects, a ping), each either
the step's answer or ``{"error": "..."}``, so that one failing step does not hide the others.
"""

from __future__ import annotations

import datetime
import json
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa


def _value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime.date) else value


def _rows(rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    listed = [list(row) for row in rows]
    return {"rows": [[_value(v) for v in row] for row in listed],
            "python_types": sorted({f"{i}:{type(v).__name__}" for row in listed
                                    for i, v in enumerate(row) if v is not None})}


def _reflect(engine: sa.Engine, bucket: str, prefix: str, key: str) -> dict[str, Any]:
    inspector = sa.inspect(engine)
    return {
        "schemas": inspector.get_schema_names(),
        "tables": inspector.get_table_names(schema=bucket),
        "views": inspector.get_view_names(schema=bucket),
        "has_table": [inspector.has_table(prefix, schema=bucket),
                      inspector.has_table("no-such-object.csv", schema=bucket)],
        "columns": {name: [[c["name"], type(c["type"]).__name__]
                           for c in inspector.get_columns(name, schema=bucket)]
                    for name in (prefix, key)},
    }


def _metadata_reflect(engine: sa.Engine, bucket: str, prefix: str, key: str) -> dict[str, Any]:
    metadata = sa.MetaData()
    metadata.reflect(bind=engine, schema=bucket, views=True)
    return {"tables": sorted(metadata.tables)}


def _core_select(engine: sa.Engine, bucket: str, prefix: str, key: str) -> dict[str, Any]:
    table = sa.Table(prefix, sa.MetaData(), schema=bucket, autoload_with=engine)
    query = (sa.select(table.c.order_id, table.c.region, table.c.amount, table.c.placed,
                       table.c.paid)
             .where(table.c.region == "r1", table.c.amount > 500.0))
    with engine.connect() as connection:
        answer = _rows(connection.execute(query))
    return {"sql": str(query.compile(engine)), **answer}


def _core_aggregate(engine: sa.Engine, bucket: str, prefix: str, key: str) -> dict[str, Any]:
    table = sa.Table(key, sa.MetaData(), schema=bucket, autoload_with=engine)
    query = (sa.select(table.c.region, sa.func.count().label("n"),
                       sa.func.sum(table.c.amount).label("total"))
             .group_by(table.c.region).order_by(table.c.region))
    with engine.connect() as connection:
        return _rows(connection.execute(query))


def _ping(engine: sa.Engine, bucket: str, prefix: str, key: str) -> dict[str, Any]:
    with engine.connect() as connection:
        return _rows(connection.execute(sa.text("SELECT 1")))


_STEPS: dict[str, Callable[[sa.Engine, str, str, str], dict[str, Any]]] = {
    "reflect": _reflect,
    "metadata_reflect": _metadata_reflect,
    "core_select": _core_select,
    "core_aggregate": _core_aggregate,
    "ping": _ping,
}


def main(host: str, port: str, bucket: str, prefix: str, key: str) -> None:
    """Run every step against the server at ``host:port`` and print the answers as JSON."""
    # tls=false: the test server listens on plaintext grpc:// (the dialect defaults to TLS)
    engine = sa.create_engine(f"adbc+flightsql://{host}:{port}?tls=false")
    answers: dict[str, Any] = {}
    with warnings.catch_warnings():
        # the ADBC DB-API warns that autocommit cannot be turned off; the server is read-only
        warnings.simplefilter("ignore")
        for name, step in _STEPS.items():
            try:
                answers[name] = step(engine, bucket, prefix, key)
            except Exception as exc:  # reported to the test, which names the step
                answers[name] = {"error": f"{type(exc).__name__}: {exc}"}
    engine.dispose()
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
