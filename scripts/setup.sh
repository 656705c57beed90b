#!/usr/bin/env bash
# Create .venv (once) and install the project with everything the tests and the demo need;
# create .venv-clients (once) with the clients we did not write that cannot share .venv
# (awswrangler pins pyarrow<26); and .venv-flightsql-dbapi (once) for flightsql-dbapi, which pins
# SQLAlchemy<2 while .venv (pyiceberg's SQL catalog) and .venv-clients (sqlalchemy-adbc) need
# SQLAlchemy>=2. The tests run those clients in a subprocess against the server.
# Safe to re-run: an up-to-date environment is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.flight-select-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[dev]"
  touch "$stamp"
fi
clients_requirements=tests/flight_storage/clients/requirements.txt
if [ ! -x .venv-clients/bin/python ]; then
  "$PYTHON" -m venv .venv-clients
fi
clients_stamp=.venv-clients/.flight-select-installed
if [ ! -f "$clients_stamp" ] || [ "$clients_requirements" -nt "$clients_stamp" ]; then
  .venv-clients/bin/python -m pip install --quiet --upgrade pip
  .venv-clients/bin/python -m pip install --quiet -r "$clients_requirements"
  touch "$clients_stamp"
fi
dbapi_requirements=tests/flight_storage/clients/requirements-flightsql-dbapi.txt
if [ ! -x .venv-flightsql-dbapi/bin/python ]; then
  "$PYTHON" -m venv .venv-flightsql-dbapi
fi
dbapi_stamp=.venv-flightsql-dbapi/.flight-select-installed
if [ ! -f "$dbapi_stamp" ] || [ "$dbapi_requirements" -nt "$dbapi_stamp" ]; then
  .venv-flightsql-dbapi/bin/python -m pip install --quiet --upgrade pip
  .venv-flightsql-dbapi/bin/python -m pip install --quiet -r "$dbapi_requirements"
  touch "$dbapi_stamp"
fi
