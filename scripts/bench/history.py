#!/usr/bin/env python3
"""History rows of scripts/bench.sh: one user's history read through the support API.

    history.py TETHER BASE DATABASE_URL PSQL RESULTS_FILE

Makes one user with about 1,000 events (an Apple user signed in 500 times, two events each, through
/v1/sign-in like any client), a support key (`tether admin-keys create`), then times 100 full reads of
that history (pages of 500, following nextAfter) and 200 first pages of 50 through
GET /v1/admin/users/{id}/history. Baseline: the same reads as plain indexed SELECTs of the user's
events in psql (\\timing), in the same run. Appends key=value lines to RESULTS_FILE.
"""
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import setup  # noqa: E402  (the bench's own client and token minting)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main(tether, base, url, psql, results):
    client = setup.Client(base)
    token = setup.apple_token(client, "history", 0)
    user_id = None
    for _ in range(500):
        answer = client.post("/v1/sign-in", {"provider": "apple", "credential": {"identityToken": token}}, expect={200, 201})
        user_id = answer["user"]["id"]
    created = subprocess.run([tether, "admin-keys", "create", "--role", "support", "--name", "bench"],
                             env=dict(os.environ, TETHER_DATABASE_URL=url), check=True, capture_output=True, text=True)
    key = created.stdout.strip().splitlines()[-1]
    parts = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def get(path):
        connection.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            sys.exit(f"GET {path}: {response.status} {body[:200]!r}")
        return json.loads(body)

    def full_read():
        events, after = 0, None
        while True:
            page = get(f"/v1/admin/users/{user_id}/history?limit=500" + (f"&after={after}" if after else ""))
            events += len(page["events"])
            after = page.get("nextAfter")
            if not after:
                return events

    events = full_read()  # warm-up, and the count
    full, first = [], []
    for _ in range(100):
        started = time.perf_counter()
        full_read()
        full.append((time.perf_counter() - started) * 1000)
    for _ in range(200):
        started = time.perf_counter()
        get(f"/v1/admin/users/{user_id}/history?limit=50")
        first.append((time.perf_counter() - started) * 1000)

    def raw(limit, repeat):
        select = f"SELECT * FROM events WHERE user_id = '{user_id}' ORDER BY position LIMIT {limit};\n"
        script = "\\timing on\n\\o /dev/null\n" + select * repeat
        run = subprocess.run([psql, url, "-qX", "-v", "ON_ERROR_STOP=1"], input=script, check=True, capture_output=True, text=True)
        return [float(value) for value in re.findall(r"Time: ([\d.]+) ms", run.stdout + run.stderr)]

    raw_full, raw_first = raw(2000, 100), raw(50, 200)
    lines = [
        f"history.events={events}",
        f"history.full_p50_ms={percentile(full, 0.5):.2f}", f"history.full_p99_ms={percentile(full, 0.99):.2f}",
        f"history.page_p50_ms={percentile(first, 0.5):.2f}", f"history.page_p99_ms={percentile(first, 0.99):.2f}",
        f"history.raw_full_p50_ms={statistics.median(raw_full):.2f}", f"history.raw_page_p50_ms={statistics.median(raw_first):.2f}",
    ]
    with open(results, "a") as file:
        file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
