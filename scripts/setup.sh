#!/usr/bin/env bash
# Create .venv (once) and install the project with everything the tests and the demo need;
# create .venv-clients, .venv-flightsql-dbapi and .venv-s3fs (once) with the clients we did not
# write that cannot share .venv (awswrangler pins pyarrow<26; flightsql-dbapi pins SQLAlchemy<2
# while .venv (pyiceberg's SQL catalog) and .venv-clients (sqlalchemy-adbc) need SQLAlchemy>=2;
# s3fs's aiobotocore an older botocore): the tests run them in a subprocess against the server.
# rclone comes from Debian's packages.
# Safe to re-run: an up-to-date environment is left as it is (and says so in one line).
# A first run takes minutes; it prints a line per step (packages resolved, large downloads,
# wheels built, the install) and keeps pip's whole output in <venv>/pip-install.log.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

say() { printf 'setup [%3ds]: %s\n' "$SECONDS" "$*"; }

# pip's output reduced to the steps a person waits on: every 25th package resolved, each file
# of 10 MB or more, each wheel built from source, the install itself, and pip's errors.
progress() {
  awk -v every=25 '
    function step(text) { printf "  %s\n", text; fflush() }
    /^(Collecting|Processing) / {
      if (++n % every == 0) {
        name = $2; sub(/.*\//, "", name); step(n " packages resolved (now " name ")")
      }
    }
    /(Downloading|Using cached) .*\(([0-9.]+ [MG]B)\)/ {
      size = $0; sub(/.*\(/, "", size); sub(/\).*/, "", size)
      split(size, parts, " ")
      if (parts[2] == "GB" || parts[1] + 0 >= 10) {
        file = $0; sub(/^ *(Downloading|Using cached) /, "", file); sub(/ \(.*/, "", file)
        sub(/.*\//, "", file); step("fetched " file " (" size ")")
      }
      next
    }
    /Building (wheel|editable) for .*: started/ { step("building " $4); next }
    function packages(count) { return count " package" (count == 1 ? "" : "s") }
    /^Installing collected packages:/ {
      step("installing " packages(split($0, names, ", ")) " (the longest step)"); next
    }
    /^Successfully installed/ { step("installed " packages(NF - 2)); next }
    /^(ERROR|error)/ { print; fflush() }
  '
}

# install VENV WHAT PIP-ARGS...: pip install into VENV, reporting progress; on failure the end
# of the log is shown.
install() {
  local venv=$1 what=$2
  shift 2
  local log="$venv/pip-install.log"
  say "installing $what into $venv (pip's output: $log)"
  if ! { "$venv/bin/python" -m pip install --progress-bar off "$@" 2>&1 | tee "$log" |
           progress; }; then
    say "pip failed; the end of $log:"
    tail -n 20 "$log" >&2
    exit 1
  fi
}

# prepare VENV REQUIREMENTS WHAT PIP-ARGS...: create VENV and install into it unless it was
# installed from the same REQUIREMENTS file content (file times change with every clone). A
# VENV that is a link belongs to another checkout (a worktree sharing it) and is left alone:
# installing would point its editable install at this checkout.
prepare() {
  local venv=$1 requirements=$2 what=$3
  shift 3
  if [ -L "$venv" ]; then
    say "$venv links to $(readlink "$venv"): left as it is"
    return
  fi
  if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv with $("$PYTHON" --version)"
    "$PYTHON" -m venv "$venv"
  fi
  local stamp="$venv/.flight-select-installed"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$(sha256sum < "$requirements")" ]; then
    say "$venv is up to date"
    return
  fi
  install "$venv" "pip" --quiet --upgrade pip
  install "$venv" "$what" "$@"
  sha256sum < "$requirements" > "$stamp"
}

prepare .venv pyproject.toml \
  "flight-select with Spark, ADBC, the S3 door and the test tools (minutes the first time)" \
  -e ".[dev]"
clients_requirements=tests/flight_storage/clients/requirements.txt
prepare .venv-clients "$clients_requirements" \
  "awswrangler, sqlalchemy-adbc and the ADBC driver (clients that cannot share .venv)" \
  -r "$clients_requirements"
dbapi_requirements=tests/flight_storage/clients/requirements-flightsql-dbapi.txt
prepare .venv-flightsql-dbapi "$dbapi_requirements" \
  "flightsql-dbapi and its SQLAlchemy<2 (a venv of its own)" \
  -r "$dbapi_requirements"
s3fs_requirements=tests/flight_storage/clients/s3fs-requirements.txt
prepare .venv-s3fs "$s3fs_requirements" \
  "s3fs (its aiobotocore pins an older botocore than .venv's)" -r "$s3fs_requirements"

# rclone, an S3 client the S3 door is tested with, from Debian's packages
if ! command -v rclone > /dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    say "installing rclone from Debian's packages"
    apt-get update -qq > /dev/null && apt-get install -y -qq rclone > /dev/null
  else
    say "rclone is not installed and cannot be here (not root or no apt-get): its test fails"
  fi
fi
