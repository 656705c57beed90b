#!/usr/bin/env bash
# Quick start 1: set up, start a storage server on the sample data and run the Spark pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/flight-select-pipeline "$@"
