# Sourced by scripts/soak.sh and scripts/schemathesis.sh: `tether dev` on a throwaway PostgreSQL,
# loopback only, with a fresh master key, the Parse and Firebase surfaces on, and an admin key.
#
#   throwaway_dev_start NAME [VAR=VALUE ...] [-- DEV-ARGS ...]
#
# sets tether_pid, port, base_url, database_url, admin_key and work (a temporary directory, kept
# on failure); throwaway_dev_stop stops tether (SIGINT, up to 30 s) and PostgreSQL and reports how
# long tether took. $tether names the binary; every TETHER_* variable of the caller is dropped first.
# throwaway_dev_traps NAME makes the script's exit (or Ctrl-C) stop everything and fail when the stop does.

tether_pid=""
throwaway_dev_data=""
throwaway_dev_name=""
work=""

throwaway_dev_traps() {
  throwaway_dev_name=$1
  trap throwaway_dev_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

throwaway_dev_cleanup() {
  local status=$?
  trap - EXIT INT TERM
  throwaway_dev_stop "$throwaway_dev_name" || status=1
  if [ -n "$work" ]; then
    if [ "$status" != 0 ]; then echo "$throwaway_dev_name: logs kept in $work" >&2; else rm -rf "$work"; fi
  fi
  exit "$status"
}

throwaway_dev_start() {
  local name=$1
  shift
  local settings=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do settings+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  [ -x "$tether" ] || { echo "$name: $tether is missing (build first)" >&2; return 1; }
  while read -r variable; do unset "$variable"; done < <(compgen -e | grep '^TETHER_' || true)
  throwaway_dev_data=".tether/$name-run"
  work=$(mktemp -d "/tmp/tether-$name.XXXXXX")
  "$tether" postgres stop --data "$throwaway_dev_data" >/dev/null 2>&1 || true
  rm -rf "$throwaway_dev_data"
  local admin_url
  admin_url=$("$tether" postgres start --data "$throwaway_dev_data" --throwaway | tail -n 1)
  database_url="${admin_url%/*}/tether"
  /usr/lib/postgresql/15/bin/psql "$admin_url" -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE tether" >/dev/null
  port=$(python3 scripts/lib/free-port.py)
  base_url="http://127.0.0.1:$port"
  head -c 32 /dev/urandom | base64 >"$work/master.key"
  env TETHER_MASTER_KEY_FILE="$work/master.key" TETHER_DATABASE_URL="$database_url" TETHER_LISTEN="127.0.0.1:$port" \
    TETHER_PARSE_APP_ID="$name" TETHER_FIREBASE_PROJECT_ID="$name-project" "${settings[@]}" \
    "$tether" dev "$@" >"$work/tether.log" 2>&1 &
  tether_pid=$!
  for _ in $(seq 600); do
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$base_url/readyz" 2>/dev/null && break
    kill -0 "$tether_pid" 2>/dev/null || { cat "$work/tether.log" >&2; return 1; }
    sleep 0.1
  done
  admin_key=$(TETHER_DATABASE_URL="$database_url" "$tether" admin-keys create --role admin --name "$name" | tail -n 1)
}

# Answers 1 when tether did not stop within 30 s of SIGINT (it is then killed).
throwaway_dev_stop() {
  local name=$1 status=0
  if [ -n "$tether_pid" ]; then
    kill -INT "$tether_pid" 2>/dev/null || true
    local waited=0
    for _ in $(seq 300); do kill -0 "$tether_pid" 2>/dev/null || break; sleep 0.1; waited=$((waited + 1)); done
    echo "$name: tether stopped $((waited / 10)).$((waited % 10)) s after SIGINT" >&2
    if kill -0 "$tether_pid" 2>/dev/null; then
      echo "$name: tether did not stop within 30 s of SIGINT; its log from then, and the database's sessions:" >&2
      sed -n '/"shutting down"/,$p' "$work/tether.log" | tail -n 40 >&2 || true
      /usr/lib/postgresql/15/bin/psql "$database_url" -qAt -c \
        "SELECT pid, state, wait_event_type, wait_event, now() - query_start, left(query, 120) FROM pg_stat_activity WHERE datname = 'tether'" >&2 || true
      kill -KILL "$tether_pid" 2>/dev/null || true
      status=1
    fi
    tether_pid=""
  fi
  if [ -n "$throwaway_dev_data" ]; then
    "$tether" postgres stop --data "$throwaway_dev_data" >/dev/null 2>&1 || true
    if [ -e "$throwaway_dev_data" ] || [ -L "$throwaway_dev_data" ]; then rm -rf "$(readlink -f "$throwaway_dev_data")" "$throwaway_dev_data"; fi
  fi
  return "$status"
}
