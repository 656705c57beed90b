#!/usr/bin/env bash
# Create .venv (once) and install the project with everything the tests and the demo need;
# create .venv-clients (once) with the clients we did not write that cannot share .venv
# (awswrangler pins pyarrow<26; sqlalchemy-adbc needs SQLAlchemy>=2, flightsql-dbapi <2): the
# tests run them in a subprocess against the server.
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
