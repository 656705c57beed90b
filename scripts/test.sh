#!/usr/bin/env bash
# Quick start 2: set up and run the whole test suite (unit, conformance, integration, Spark).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
