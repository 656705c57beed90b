"""Reflect one bucket through sqlalchemy-adbc's Flight SQL dialect and read one table; print JSON.

Run with the clients' venv (``.venv-clients/``): it imports nothing of ours and reaches the
server through the ADBC Flight SQL driver only. Usage::

    sqlalchemy_reflect_table.py HOST PORT BUCKET TABLE

Prints ``{"tables": [...], "columns": [[name, type], ...], "rows": [...]}``: the bucket's table
names as the inspector lists them, the table's reflected columns, and its rows read through a
reflected ``sa.Table`` (ordered by its first column).
"""

from __future__ import annotations

import json
import sys
import warnings

import sqlalchemy as sa


def main(host: str, port: str, bucket: str, table_name: str) -> None:
    """Reflect ``bucket`` at ``host:port``, read ``table_name``, print the answers as JSON."""
    engine = sa.create_engine(f"adbc+flightsql://{host}:{port}?tls=false")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # autocommit cannot be turned off: read-only anyway
        inspector = sa.inspect(engine)
        tables = inspector.get_table_names(schema=bucket)
        table = sa.Table(table_name, sa.MetaData(), schema=bucket, autoload_with=engine)
        query = sa.select(table).order_by(next(iter(table.columns)))
        with engine.connect() as connection:
            rows = [list(row) for row in connection.execute(query)]
    engine.dispose()
    json.dump({"tables": tables,
               "columns": [[c.name, type(c.type).__name__] for c in table.columns],
               "rows": rows, "sql": str(query.compile(engine))}, sys.stdout, default=str)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
