#!/usr/bin/env bash
# make soak: a `tether dev` on a throwaway PostgreSQL under mixed load for SOAK_DURATION (a span:
# 120s, 30m; default 30m), through scripts/soak.py, which prints tether's memory, open files and
# database connections at the start and the end and fails when they do not stay flat, on any 5xx,
# or when no webhook arrives. make test runs it for 2 minutes. Loopback only; everything is stopped
# on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

tether="${SOAK_TETHER:-.build/debug/tether}"
span="${SOAK_DURATION:-30m}"
case "$span" in
  *m) seconds=$(( ${span%m} * 60 )) ;;
  *h) seconds=$(( ${span%h} * 3600 )) ;;
  *s) seconds=${span%s} ;;
  *) seconds=$span ;;
esac
data=".tether/soak-run"
work=$(mktemp -d /tmp/tether-soak.XXXXXX)
tether_pid=""
[ -x "$tether" ] || { echo "soak: $tether is missing (build first)" >&2; exit 1; }
while read -r name; do unset "$name"; done < <(compgen -e | grep '^TETHER_' || true)

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ -n "$tether_pid" ]; then
    kill -INT "$tether_pid" 2>/dev/null || true
    local waited=0
    for _ in $(seq 300); do kill -0 "$tether_pid" 2>/dev/null || break; sleep 0.1; waited=$((waited + 1)); done
    echo "soak: tether stopped $((waited / 10)).$((waited % 10)) s after SIGINT" >&2
    if kill -0 "$tether_pid" 2>/dev/null; then
      echo "soak: tether did not stop within 30 s of SIGINT" >&2
      kill -KILL "$tether_pid" 2>/dev/null || true
      status=1
    fi
  fi
  "$tether" postgres stop --data "$data" >/dev/null 2>&1 || true
  if [ -e "$data" ] || [ -L "$data" ]; then rm -rf "$(readlink -f "$data")" "$data"; fi
  if [ "$status" != 0 ]; then echo "soak: logs kept in $work" >&2; else rm -rf "$work"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$tether" postgres stop --data "$data" >/dev/null 2>&1 || true
rm -rf "$data"
admin_url=$("$tether" postgres start --data "$data" --throwaway | tail -n 1)
database_url="${admin_url%/*}/tether"
/usr/lib/postgresql/15/bin/psql "$admin_url" -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE tether" >/dev/null
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
head -c 32 /dev/urandom | base64 >"$work/master.key"
export TETHER_MASTER_KEY_FILE="$work/master.key"
TETHER_DATABASE_URL="$database_url" TETHER_LISTEN="127.0.0.1:$port" TETHER_LOG_LEVEL=${SOAK_LOG_LEVEL:-warn} TETHER_SIGN_IN_FAILURE_LIMIT=100000 \
  TETHER_PARSE_APP_ID=soak TETHER_FIREBASE_PROJECT_ID=soak-project "$tether" dev --no-seeds >"$work/tether.log" 2>&1 &
tether_pid=$!
for _ in $(seq 600); do
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "http://127.0.0.1:$port/readyz" 2>/dev/null && break
  kill -0 "$tether_pid" 2>/dev/null || { cat "$work/tether.log" >&2; exit 1; }
  sleep 0.1
done
admin_key=$(TETHER_DATABASE_URL="$database_url" "$tether" admin-keys create --role admin --name soak | tail -n 1)
echo "soak: tether dev (pid $tether_pid) on 127.0.0.1:$port for $seconds s"
python3 scripts/soak.py "http://127.0.0.1:$port" "$tether_pid" "$database_url" "$admin_key" "$seconds"
