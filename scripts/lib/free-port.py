"""Prints a TCP port on 127.0.0.1 that nothing uses now, below the kernel's ephemeral range.

A port from the ephemeral range (binding port 0) stays free only until an outgoing connection picks
it as its source port, and a server told to listen there then fails to bind (the same rule as
LocalPostgresServer.freeLoopbackPort). Falls back to port 0 when the range leaves no room below it.
"""
import random
import socket

try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as file:
        ephemeral_start = int(file.read().split()[0])
except (OSError, ValueError, IndexError):
    ephemeral_start = 32768


def bound(port):
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return None
        return probe.getsockname()[1]


candidates = [random.randrange(10000, ephemeral_start) for _ in range(200)] if ephemeral_start - 10000 >= 1000 else []
print(next((port for port in map(bound, candidates) if port), None) or bound(0))
