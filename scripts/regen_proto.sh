#!/usr/bin/env bash
# Regenerate flight_storage/_flight_sql_pb2.py from flight_storage/proto/flight_sql.proto.
#
# Needs grpcio-tools (a dev dependency). The generated module targets the protobuf major
# pinned in pyproject.toml; after regenerating, check the "Protobuf Python Version" line in
# its header against that pin and run tests/flight_storage/test_protocol.py.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

"$python" -m grpc_tools.protoc \
  --proto_path="$root/flight_storage/proto" \
  --python_out="$out" \
  --pyi_out="$out" \
  "$root/flight_storage/proto/flight_sql.proto"

mv "$out/flight_sql_pb2.py" "$root/flight_storage/_flight_sql_pb2.py"
mv "$out/flight_sql_pb2.pyi" "$root/flight_storage/_flight_sql_pb2.pyi"
echo "regenerated flight_storage/_flight_sql_pb2.py"
