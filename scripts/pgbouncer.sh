#!/usr/bin/env bash
# PgBouncer (Debian's 1.18) in session pooling mode in front of the test cluster, for the API suites'
# second run: scripts/pgbouncer.sh start POSTGRES_URL DIR prints the pooler's URL; stop DIR stops it.
# Session mode, because Tether keeps session state on its connections (SET ROLE, time zone and
# statement_timeout at connect, named prepared statements): see README "Connection poolers".
set -euo pipefail

command=${1:?start POSTGRES_URL DIR, or stop DIR}
case "$command" in
  start)
    url=${2:?the PostgreSQL URL}; dir=${3:?a directory for its files}
    port_pg=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).port)' "$url")
    user=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).username or "postgres")' "$url")
    port=$(python3 "$(dirname "$0")/lib/free-port.py")
    mkdir -p "$dir"
    cat > "$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$port_pg

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = session
server_reset_query = DISCARD ALL
# Every test makes its own database: idle server connections to finished ones go at once.
server_idle_timeout = 1
max_client_conn = 4000
default_pool_size = 200
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    printf '"%s" ""\n' "$user" > "$dir/userlist.txt"
    as_user=()
    if [ "$(id -u)" = 0 ]; then
      # PgBouncer will not run as root.
      chown -R postgres "$dir" 2>/dev/null || chmod -R a+rwX "$dir"
      as_user=(-u postgres)
    fi
    /usr/sbin/pgbouncer -d "${as_user[@]}" "$dir/pgbouncer.ini"
    for _ in $(seq 100); do
      if python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$port" 2>/dev/null; then
        python3 -c 'import sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); print(u._replace(netloc=u.netloc.rsplit(":", 1)[0] + ":" + sys.argv[2]).geturl())' "$url" "$port"
        exit 0
      fi
      sleep 0.1
    done
    echo "pgbouncer did not start: $(cat "$dir/pgbouncer.log" 2>/dev/null)" >&2
    exit 1
    ;;
  stop)
    dir=${2:?the directory it was started with}
    if [ -f "$dir/pgbouncer.pid" ]; then kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true; fi
    ;;
  *)
    echo "usage: $0 start POSTGRES_URL DIR | stop DIR" >&2; exit 2
    ;;
esac
