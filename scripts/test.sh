#!/usr/bin/env bash
# Runs the whole test suite against a throwaway PostgreSQL cluster made for this run.
set -euo pipefail
cd "$(dirname "$0")/.."

data=".tether/test-run"
tether=".build/debug/tether"
if [ -d "$data" ]; then
  "$tether" postgres stop --data "$data" >/dev/null 2>&1 || true
  rm -rf "$(readlink -f "$data")" "$data"
fi
url=$("$tether" postgres start --data "$data" --throwaway | tail -n 1)
bouncer="$data-pgbouncer"
cleanup() {
  # A run cut short stops the schemathesis it started in the background: all of its process group (its own
  # trap then stops its server and cluster).
  if [ -n "${schemathesis_pid:-}" ]; then
    kill -TERM -- "-$schemathesis_pid" 2>/dev/null || kill -TERM "$schemathesis_pid" 2>/dev/null || true
    wait "$schemathesis_pid" 2>/dev/null || true
  fi
  rm -f "${schemathesis_output:-}"
  scripts/pgbouncer.sh stop "$bouncer" >/dev/null 2>&1 || true
  rm -rf "$bouncer"
  "$tether" postgres stop --data "$data" >/dev/null 2>&1 || true
  rm -rf "$(readlink -f "$data")" "$data"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export TETHER_TEST_DATABASE_URL="$url"
# Swift Testing runs test cases in parallel; each of ours starts a server and a fresh database.
# Unbounded on these 2 cores the run was slower (75-89 s against 64 s) and some requests
# starved past their 30 s deadline (503s). Two at a time keeps both cores busy and none starved.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-2}"
# The real firebase-admin SDK's suite runs when `make test` has installed it (Tests/firebase-admin).
if [ -x .tether/firebase-admin-venv/bin/python ]; then
  export TETHER_TEST_FIREBASE_ADMIN_PYTHON="$PWD/.tether/firebase-admin-venv/bin/python"
fi
echo "Test PostgreSQL: $url"
if [ "$#" -gt 0 ]; then
  swift test --skip-build "$@"
else
  # Chromium takes both cores while it starts; the browser suite runs after the rest,
  # so it does not starve the other suites' servers and clients into timeouts. The
  # size-estimate, outbound-memory and malloc suites read the process's malloc figures (the last also
  # needs arenas that the other suites' large blocks have not filled with free space), so each runs alone too.
  swift test --skip-build --skip BrowserTests --skip StateSizeCalibrationTests --skip OutboundMemoryTests --skip MallocTests
  swift test --skip-build --filter StateSizeCalibrationTests
  swift test --skip-build --filter MallocTests
  swift test --skip-build --filter OutboundMemoryTests
  swift test --skip-build --filter BrowserTests
  # The API suites once more, every connection through PgBouncer in session mode (README "Connection poolers").
  if [ -x /usr/sbin/pgbouncer ]; then
    pooler=$(scripts/pgbouncer.sh start "$url" "$bouncer")
    echo "The API suites through PgBouncer (session mode): $pooler"
    # What these prove does not depend on the pooler: the 20,000 forged sign-ins of the first pass are
    # 5,000 here, and the million-row `--verify` (about a fifth of this pass's time; the other replay tests
    # run here) runs in the first pass only. The client's suite runs here too: a cancelled statement's
    # cancel request goes through the pooler.
    TETHER_FORGED_SIGN_INS=5000 TETHER_TEST_POOLER_URL="$pooler" swift test --skip-build --filter TetherAPITests \
      --filter PostgresClientTests --skip BrowserTests \
      --skip StateSizeCalibrationTests --skip verifyFindsTheOneChangedRowAmongAMillion
  else
    echo "pgbouncer is not installed (make test installs it): the pooled run of the API suites is skipped" >&2
  fi
  # schemathesis against schema/openapi.yaml and a tether dev (no 5xx, nothing the document does not
  # describe), side by side with two minutes of make soak (tether dev under mixed load, its memory, files
  # and connections flat): each has a server and a PostgreSQL of its own, and the soak runs for its two
  # minutes whatever else runs, so the pair takes about 3 minutes instead of 4 one after the other.
  schemathesis_status=0
  if [ -x .tether/schemathesis-venv/bin/st ]; then
    schemathesis_output=$(mktemp)
    # In a process group of its own, which a stop can signal whole (a Ctrl-C reaches only this script's).
    setsid --wait scripts/schemathesis.sh >"$schemathesis_output" 2>&1 &
    schemathesis_pid=$!
  else
    echo "schemathesis is not installed (make test installs it): its run is skipped" >&2
  fi
  soak_status=0
  SOAK_DURATION="${TETHER_TEST_SOAK_DURATION:-120s}" scripts/soak.sh || soak_status=$?
  if [ -n "${schemathesis_pid:-}" ]; then
    wait "$schemathesis_pid" || schemathesis_status=$?
    schemathesis_pid=""
    cat "$schemathesis_output"
    rm -f "$schemathesis_output"
    echo "schemathesis: exit $schemathesis_status"
  fi
  [ "$soak_status" = 0 ] && [ "$schemathesis_status" = 0 ] || exit 1
fi
