#!/usr/bin/env python3
"""Replay rows of scripts/bench.sh: the log the run's commands wrote, rebuilt by `tether replay`.

    replay.py TETHER DATABASE_URL PSQL RESULTS_FILE

Measures, on the bench's own PostgreSQL, the raw rate of `COPY (SELECT * FROM events) TO '/dev/null'`
(the baseline, before and after the replays: the mean is used, as the machine's speed drifts), then
`tether replay --verify` and `tether replay` (events/s from their last line), and the replay process's
peak RSS. Appends key=value lines to RESULTS_FILE.
"""
import os
import re
import resource
import subprocess
import sys
import time


def main(tether, url, psql, results):
    def sql(text):
        return subprocess.run([psql, url, "-qAt", "-v", "ON_ERROR_STOP=1", "-c", text],
                              check=True, capture_output=True, text=True).stdout.strip()

    def copy_rate():
        started = time.monotonic()
        sql("COPY (SELECT * FROM events) TO '/dev/null'")
        return events / (time.monotonic() - started)

    events = int(sql("SELECT count(*) FROM events"))
    sql("COPY (SELECT * FROM events) TO '/dev/null'")  # warm the table's pages, as the replays will find them
    before = copy_rate()
    lines = [f"replay.events={events}", f"replay.copy_rate_before={before:.0f}"]
    environment = dict(os.environ, TETHER_DATABASE_URL=url)
    for key, arguments in (("verify", ["replay", "--projection", "accounts", "--verify"]),
                           ("replace", ["replay", "--projection", "accounts"])):
        run = subprocess.run([tether] + arguments, env=environment, capture_output=True, text=True)
        last = (run.stdout.strip().splitlines() or [""])[-1]
        match = re.search(r"(\d+) events in ([\d.]+) s", last)
        if run.returncode != 0 or not match:
            sys.exit(f"tether {' '.join(arguments)} failed ({run.returncode}): {last or run.stderr.strip()}")
        lines.append(f"replay.{key}_events={match.group(1)}")
        lines.append(f"replay.{key}_rate={int(match.group(1)) / float(match.group(2)):.0f}")
    after = copy_rate()
    lines.append(f"replay.copy_rate_after={after:.0f}")
    lines.append(f"replay.copy_rate={(before + after) / 2:.0f}")
    # The replays are this script's only children: their peak RSS (kilobytes on Linux).
    lines.append(f"replay.rss={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.1f}")
    with open(results, "a") as file:
        file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
