#!/usr/bin/env python3
"""Reads /proc for scripts/bench.sh.

    procstat.py cpu TETHER_PID POSTMASTER_PID
        "<tether CPU seconds> <PostgreSQL CPU seconds>": user + system time so far of the
        tether process, and of the postmaster plus every process it started (backends,
        checkpointer, WAL writer, autovacuum). A backend that exits between two readings
        takes its time with it, so read around a load whose connections stay open.
    procstat.py rss PID
        The process's resident set (VmRSS) in MB (10^6 bytes).
"""
import os
import sys

TICKS = os.sysconf("SC_CLK_TCK")


def stat(pid):
    """(parent pid, utime + stime in ticks) of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            text = file.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[11]) + int(fields[12])


def cpu(tether_pid, postmaster_pid):
    tether = stat(tether_pid)
    if tether is None:
        sys.exit(f"procstat: no process {tether_pid}")
    postgres = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = stat(int(entry))
            if info and (int(entry) == postmaster_pid or info[0] == postmaster_pid):
                postgres += info[1]
    print(f"{tether[1] / TICKS:.2f} {postgres / TICKS:.2f}")


def rss(pid):
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            if line.startswith("VmRSS:"):
                print(f"{int(line.split()[1]) * 1024 / 1e6:.1f}")
                return
    sys.exit(f"procstat: no VmRSS for {pid}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "cpu":
        cpu(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "rss":
        rss(int(sys.argv[2]))
    else:
        sys.exit(__doc__)
