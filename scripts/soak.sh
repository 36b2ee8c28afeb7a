#!/usr/bin/env bash
# make soak: a `tether dev` on a throwaway PostgreSQL under mixed load for SOAK_DURATION (a span:
# 120s, 30m; default 30m), through scripts/soak.py, which prints tether's memory, open files and
# database connections at the start and the end and fails when they do not stay flat, on any 5xx,
# or when no webhook arrives. make test runs it for 2 minutes. SOAK_STATE_CACHE_MB (default 256,
# tether's own) is TETHER_STATE_CACHE_MB: a small one makes the kept states reach their bound early,
# so that what else grows shows. Loopback only; everything is stopped on exit.
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
source scripts/lib/throwaway-dev.sh
throwaway_dev_traps soak

throwaway_dev_start soak TETHER_LOG_LEVEL="${SOAK_LOG_LEVEL:-info}" TETHER_SIGN_IN_FAILURE_LIMIT=100000 \
  TETHER_STATE_CACHE_MB="${SOAK_STATE_CACHE_MB:-256}" -- --no-seeds
echo "soak: tether dev (pid $tether_pid) on 127.0.0.1:$port for $seconds s"
python3 scripts/soak.py "$base_url" "$tether_pid" "$database_url" "$admin_key" "$seconds"
