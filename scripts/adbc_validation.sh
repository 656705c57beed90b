#!/usr/bin/env bash
# Run the ADBC driver validation suite (github.com/adbc-drivers/validation) against a
# flight-select server, on demand (it is not part of pytest: it needs Python >= 3.13 and
# pyarrow < 26, so it runs in a virtual environment of its own).
#
#   scripts/adbc_validation.sh VALIDATION_CHECKOUT [SERVER_TREE]
#
# VALIDATION_CHECKOUT: a checkout of adbc-drivers/validation. SERVER_TREE: the flight-select
# tree whose server is tested (default: this one; give an older worktree to compare). The
# environment goes to $VALIDATION_VENV (default /tmp/flight-select-validation-venv), built with
# $PYTHON313 (default: python3.13); the server gets $SERVER_ARGS (default --writable --default-catalog lake). Prints passed/failed/skipped/xfailed by area and leaves
# the JUnit XML in $OUT (default /tmp/flight-select-validation.xml).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
suite="${1:?usage: $0 VALIDATION_CHECKOUT [SERVER_TREE]}"
tree="${2:-$root}"
venv="${VALIDATION_VENV:-/tmp/flight-select-validation-venv}"
out="${OUT:-/tmp/flight-select-validation.xml}"
python313="${PYTHON313:-python3.13}"

if [ ! -x "$venv/bin/pytest" ]; then
  "$python313" -m venv "$venv"
  "$venv/bin/pip" install -q "$suite" adbc-driver-flightsql
fi

data="$(mktemp -d)"
log="$data/server.log"
mkdir -p "$data/lake"
cp -r "$root/data/samples/sales" "$data/sales"
PYTHONPATH="$tree" "$root/.venv/bin/python" -m flight_storage serve --data "$data" --port 0 \
  ${SERVER_ARGS---writable --default-catalog lake} >"$data/server.out" 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do
  grep -q "listening on" "$data/server.out" 2>/dev/null && break
  sleep 0.2
done
uri="$(sed -n 's/.*listening on //p' "$data/server.out" | head -1)"
[ -n "$uri" ] || { echo "server did not start: $(cat "$log")" >&2; exit 1; }

cd "$root/scripts/adbc_validation"
FLIGHT_SELECT_URI="$uri" FLIGHT_SELECT_DATA="$data" "$venv/bin/pytest" -q -p no:cacheprovider --junitxml "$out" \
  test_connection.py test_statement.py test_query.py test_ingest.py >/dev/null 2>&1 || true
"$venv/bin/python" - "$out" <<'PY'
import sys, collections, xml.etree.ElementTree as ET
counts = collections.defaultdict(collections.Counter)
for case in ET.parse(sys.argv[1]).iter("testcase"):
    area = case.get("classname", "").split(".")[-1]
    kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
    if kind == "skipped" and "xfail" in (case.find("skipped").get("type", "") or ""):
        kind = "xfailed"
    counts[area][kind] += 1
for area, c in sorted(counts.items()):
    print(f"{area:16} " + " ".join(f"{k} {c[k]}" for k in ("passed", "failure", "error",
                                                        "skipped", "xfailed") if c[k]))
total = sum(counts.values(), collections.Counter())
print(f"{'total':16} " + " ".join(f"{k} {total[k]}" for k in sorted(total)))
PY
