#!/usr/bin/env bash
# The service benchmark of `make bench` (BENCHMARKS.md): a release `tether dev` on its own
# throwaway PostgreSQL, loaded by wrk with 16 clients, next to pgbench baselines taken on
# the same server in the same run. Prints one table; a missed target never fails the run,
# a failed set-up does. Everything listens on 127.0.0.1 only; tether and PostgreSQL are
# stopped on exit, whatever happens.
#
# Environment: BENCH_DURATION (seconds a scenario, default 10), BENCH_LOG_EVENTS (the smallest
# log the replay rows run on, default 1,000,000), BENCH_KEEP=1 keeps the working directory
# (tokens, wrk and tether logs, results) and says where it is.
set -euo pipefail
cd "$(dirname "$0")/.."

tether=".build/release/tether"
duration="${BENCH_DURATION:-10}"
log_target="${BENCH_LOG_EVENTS:-1000000}"
threads=2
connections=16
sign_in_users=2000  # returning users of the sign-in scenarios; their first sessions are the refresh scenario's
link_users=256      # signed-in users who link and unlink Facebook
pgbin=/usr/lib/postgresql/15/bin
bench=scripts/bench
data=".tether/bench-run"

fail() { echo "bench: $*" >&2; exit 1; }
step() { echo "bench: $*" >&2; }

[ -x "$tether" ] || fail "$tether is missing (make bench-service builds it)"
command -v wrk >/dev/null || fail "wrk is missing (make bench-service installs it)"
[ -x "$pgbin/pgbench" ] || fail "$pgbin/pgbench is missing (Debian package postgresql-15)"
command -v python3 >/dev/null || fail "python3 is missing"

# Nothing of the caller's Tether configuration leaks into the server under test.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^TETHER_' || true)

work=$(mktemp -d /tmp/tether-bench.XXXXXX)
results="$work/results"
tether_pid=""
child_pid=""

# child COMMAND...: runs COMMAND and waits for it, so that a signal reaches the trap at once
# (bash runs a trap only after its foreground command returns) and cleanup can stop it.
child() {
  local status=0
  "$@" &
  child_pid=$!
  wait "$child_pid" || status=$?
  child_pid=""
  return "$status"
}

stop_tether() {
  if [ -n "$tether_pid" ] && kill -0 "$tether_pid" 2>/dev/null; then
    kill -INT "$tether_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$tether_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$tether_pid" 2>/dev/null || true
    wait "$tether_pid" 2>/dev/null || true
  fi
  tether_pid=""
}
remove_cluster() {
  "$tether" postgres stop --data "$data" >/dev/null 2>&1 || true
  if [ -e "$data" ] || [ -L "$data" ]; then rm -rf "$(readlink -f "$data")" "$data"; fi
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ -n "$child_pid" ]; then kill -TERM "$child_pid" 2>/dev/null || true; wait "$child_pid" 2>/dev/null || true; fi
  stop_tether
  remove_cluster
  if [ "${BENCH_KEEP:-}" = 1 ] || [ "$status" != 0 ]; then
    echo "bench: logs and results kept in $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

record() { echo "$1=$2" >>"$results"; }


# run_wrk NAME SCRIPT ARGS...: one wrk run of DURATION seconds; records NAME.<key> from
# the script's RESULT line (common.lua done()). No RESULT line means the script failed.
run_wrk() {
  local name=$1 script=$2
  shift 2
  child wrk -t"$threads" -c"$connections" -d"${duration}s" --timeout 15s -s "$bench/$script" "$url" -- "$@" >"$work/wrk-$name.log" 2>&1 \
    || { cat "$work/wrk-$name.log" >&2; fail "wrk failed ($name)"; }
  local line
  line=$(grep '^RESULT ' "$work/wrk-$name.log" | tail -n 1) \
    || { cat "$work/wrk-$name.log" >&2; fail "wrk gave no result ($name)"; }
  if grep -q '\.lua:[0-9]*:' "$work/wrk-$name.log"; then
    cat "$work/wrk-$name.log" >&2
    fail "the Lua script failed ($name)"
  fi
  local pair
  for pair in ${line#RESULT }; do record "$name.${pair%%=*}" "${pair#*=}"; done
  step "  $(sed -n 's/^RESULT //p' "$work/wrk-$name.log" | tail -n 1)"
}

# pgbench_tps KEY SQL_FILE: records KEY, the transactions per second of pgbench running
# SQL_FILE over the tether database.
pgbench_tps() {
  local key=$1
  shift
  local log="$work/pgbench-$key.log"
  child "$pgbin/pgbench" -n -c"$connections" -j"$threads" -T"$duration" -f "$1" "$database_url" >"$log" 2>&1 \
    || { cat "$log" >&2; fail "pgbench failed ($1)"; }
  local failed
  failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$log")
  [ "${failed:-0}" = 0 ] || { cat "$log" >&2; fail "pgbench had failed transactions ($1)"; }
  local tps
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$log")
  [ -n "$tps" ] || { cat "$log" >&2; fail "no tps in pgbench output ($1)"; }
  record "$key" "$tps"
  step "  $(printf '%.0f' "$tps") tx/s"
}

# idle_sample NAME: records idle.NAME, the percentage of the machine's CPU time that was idle
# over one second while the benchmark itself is quiet. Something else busy on the machine
# (a build, a test suite) shows here, and the report flags it.
idle_sample() {
  local before after
  before=$(awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
  sleep 1
  after=$(awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
  record "idle.$1" "$(echo "$before $after" | awk '{ printf "%.0f", ($3 > $1) ? 100 * ($4 - $2) / ($3 - $1) : 100 }')"
}

cpu_of() { python3 "$bench/procstat.py" cpu "$tether_pid" "$postmaster_pid"; }
rss_of() { python3 "$bench/procstat.py" rss "$tether_pid"; }

record date "$(date -u '+%Y-%m-%d %H:%M UTC')"
record commit "$(git describe --always --dirty 2>/dev/null || echo unknown)"
record cores "$(nproc)"
record cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
record memory "$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
record duration "$duration"
idle_sample start

# PostgreSQL of its own, as scripts/test.sh makes it, then tether dev against it.
remove_cluster
admin_url=$("$tether" postgres start --data "$data" --throwaway | tail -n 1)
postmaster_pid=$(head -n 1 "$data/postmaster.pid")
database_url="${admin_url%/*}/tether"
"$pgbin/psql" "$admin_url" -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE tether" >/dev/null
step "PostgreSQL: $database_url"

port=$(python3 scripts/lib/free-port.py)
url="http://127.0.0.1:$port"
# A master key of the run's own, for the server and for the commands run against its database later.
head -c 32 /dev/urandom | base64 >"$work/master.key"
export TETHER_MASTER_KEY_FILE="$work/master.key"
TETHER_DATABASE_URL="$database_url" TETHER_LISTEN="127.0.0.1:$port" TETHER_LOG_LEVEL=warn \
  TETHER_SIGN_IN_FAILURE_LIMIT=100000 "$tether" dev --no-seeds >"$work/tether.log" 2>&1 &
tether_pid=$!
for _ in $(seq 600); do
  curl -sf "$url/readyz" >/dev/null 2>&1 && break
  kill -0 "$tether_pid" 2>/dev/null || { cat "$work/tether.log" >&2; fail "tether dev exited during start-up"; }
  sleep 0.1
done
curl -sf "$url/readyz" >/dev/null || { cat "$work/tether.log" >&2; fail "tether dev not ready after 60 s"; }
step "tether dev (pid $tether_pid): $url"
sleep 1
rss_idle=$(rss_of)
record rss.idle "$rss_idle"

# Baselines on the same server, in a scratch schema beside tether's tables.
"$pgbin/psql" "$database_url" -qAt -v ON_ERROR_STOP=1 -f "$bench/scratch.sql" >/dev/null
idle_sample a_before
step "baseline (a): pgbench, one ~400-byte event insert a transaction"
pgbench_tps a_before "$bench/insert_event.sql"
idle_sample b
step "baseline (b): pgbench, a returning sign-in's writes as one statement"
pgbench_tps b "$bench/sign_in_writes.sql"

step "minting tokens, first sign-ins of $sign_in_users + $link_users users"
child python3 "$bench/setup.py" users "$url" "$work" "$sign_in_users" "$link_users" || fail "set-up failed"

step "warm-up: sign-in, 3 s"
child wrk -t"$threads" -c"$connections" -d3s --timeout 15s -s "$bench/sign-in.lua" "$url" -- "$work/signin_tokens.txt" "$threads" \
  >"$work/wrk-warm-up.log" 2>&1 || { cat "$work/wrk-warm-up.log" >&2; fail "wrk failed (warm-up)"; }

idle_sample signin
step "sign-in, returning users, as fast as 16 clients go"
before=$(cpu_of)
run_wrk signin sign-in.lua "$work/signin_tokens.txt" "$threads"
after=$(cpu_of)
read -r tether_before postgres_before <<<"$before"
read -r tether_after postgres_after <<<"$after"
record cpu.tether "$(python3 -c "print(f'{$tether_after - $tether_before:.2f}')")"
record cpu.postgres "$(python3 -c "print(f'{$postgres_after - $postgres_before:.2f}')")"

half=$(python3 -c "print(max(1, round($(sed -n 's/^signin.rate=//p' "$results") / 2)))")
record paced.target "$half"
idle_sample paced
step "sign-in at half the maximum rate: $half/s"
run_wrk paced sign-in.lua "$work/signin_tokens.txt" "$threads" "$half"

# Tokens for new users: enough for 2.5 times the sign-in rate, at most 80,000.
signups=$(python3 -c "print(min(80000, 1000 + int(2.5 * $half * 2 * $duration)))")
step "minting $signups tokens of new users"
child python3 "$bench/setup.py" signup "$url" "$work" "$signups" || fail "set-up failed (sign-up tokens)"
idle_sample signup
step "sign-up, new Apple users"
run_wrk signup sign-up.lua "$work/signup_tokens.txt" "$threads"

idle_sample link
step "link + unlink, Facebook classic"
run_wrk link link-unlink.lua "$work/link_users.txt" "$threads"

idle_sample refresh
step "refresh"
run_wrk refresh refresh.lua "$work/refresh_tokens.txt" "$threads"

idle_sample a_after
step "baseline (a) again"
pgbench_tps a_after "$bench/insert_event.sql"
rss_after=$(rss_of)
record rss.after "$rss_after"

kill -0 "$tether_pid" 2>/dev/null || { cat "$work/tether.log" >&2; fail "tether dev exited during the run"; }

step "history of a 1,000-event user through the support API, next to plain SELECTs of its events"
child python3 "$bench/history.py" "$tether" "$url" "$database_url" "$pgbin/psql" "$results" || fail "history failed"

step "second factors: 500 users enrol TOTP, then sign in through a challenge (one wrong code, one recovery code)"
child python3 "$bench/setup.py" mfa "$url" "$work" 500 || fail "set-up failed (second factors)"

# The replay rows run on a log of at least $log_target events: what the scenarios wrote, topped up
# by returning sign-ins (a SignedIn and a SessionStarted each) through /v1 at full speed. Rounds last
# at most 4 minutes, each with the users' identity tokens minted afresh: Apple's are refused 10 minutes
# after they were issued, and on a slow or busy machine the fill takes longer than that.
events_now() { "$pgbin/psql" "$database_url" -qAt -v ON_ERROR_STOP=1 -c "SELECT count(*) FROM events"; }
have=$(events_now)
for round in 1 2 3 4 5 6 7 8 9 10; do
  [ "$have" -lt "$log_target" ] || break
  rate=$(sed -n 's/^signin.rate=//p' "$results")
  seconds=$(python3 -c "import math; print(min(240, max(5, math.ceil(($log_target - $have) / (2 * $rate) * 1.05))))")
  child python3 "$bench/setup.py" remint "$url" "$work" "$sign_in_users" || fail "set-up failed (fresh tokens for the fill)"
  step "filling the log: $have events; $seconds s of returning sign-ins for the $((log_target - have)) more"
  child wrk -t"$threads" -c"$connections" -d"${seconds}s" --timeout 15s -s "$bench/sign-in.lua" "$url" -- \
    "$work/signin_tokens.txt" "$threads" >"$work/wrk-fill-$round.log" 2>&1 \
    || { cat "$work/wrk-fill-$round.log" >&2; fail "wrk failed (filling the log)"; }
  grep -q '^RESULT ok=[0-9]* bad=0 ' "$work/wrk-fill-$round.log" \
    || { cat "$work/wrk-fill-$round.log" >&2; fail "sign-ins failed while filling the log"; }
  have=$(events_now)
done
[ "$have" -ge "$log_target" ] || fail "the log holds $have events, short of $log_target"

step "replay of the $have-event log (accounts), next to a raw COPY of the events table"
# As the cluster's superuser, which owns the tables: replay rebuilds and swaps tables only their owner may move.
child python3 "$bench/replay.py" "$tether" "$database_url" "$pgbin/psql" "$results" || fail "replay failed"
if [ -s "$work/tether.log" ]; then
  step "tether logged $(wc -l <"$work/tether.log") line(s) at warn or above; the first:"
  head -n 5 "$work/tether.log" >&2
fi
echo
python3 "$bench/report.py" "$results"
