#!/usr/bin/env python3
"""Prints the table of scripts/bench.sh from its results file (one key=value a line).

    report.py RESULTS_FILE

Every target row says whether it holds. A scenario that had errors (answers other than
the expected status, socket errors or timeouts, or too few prepared tokens) is flagged
with "!" and explained under the table. A missed target never changes the exit status.
"""
import sys


def load(path):
    values = {}
    with open(path) as file:
        for line in file:
            line = line.strip()
            if "=" in line:
                key, value = line.split("=", 1)
                values[key] = value
    return values


def main(path):
    v = load(path)
    num = lambda key: float(v[key])
    notes = []
    rows = []
    held = [0, 0]

    def errors(scenario, label):
        count = int(num(f"{scenario}.bad") + num(f"{scenario}.socket_errors"))
        extra = []
        for name in ("exhausted", "lost", "starved"):
            if float(v.get(f"{scenario}.{name}", 0)) > 0:
                extra.append(f"{name} {int(float(v[f'{scenario}.{name}']))}")
        if count or extra:
            notes.append(
                f"! {label}: {count} error(s) (answers by status {v[f'{scenario}.statuses']}; "
                f"socket errors and timeouts {int(num(f'{scenario}.socket_errors'))})"
                + (f"; {', '.join(extra)} (exhausted: the prepared tokens ran out; lost: sessions or users"
                   " dropped after a failed request; starved: none left to send)" if extra else ""))
        return count, bool(count or extra)

    def target(holds, flagged=False):
        held[1] += 1
        held[0] += 1 if holds else 0
        return ("yes" if holds else "NO") + (" !" if flagged else "")

    a = (num("a_before") + num("a_after")) / 2
    b = num("b")
    rows.append(("(a) pgbench: insert one ~400 B event", f"{a:,.0f} tx/s", "",
                 f"mean: {num('a_before'):,.0f} before, {num('a_after'):,.0f} after", "", ""))
    rows.append(("(b) pgbench: sign-in writes, 1 statement", f"{b:,.0f} tx/s", "", f"(b)/(a) {b / a:.3f}", "", ""))

    signin = num("signin.rate")
    count, flagged = errors("signin", "sign-in")
    rows.append(("sign-in, returning Apple users", f"{signin:,.0f} req/s", str(count),
                 f"/(a) {signin / a:.3f}", "≥ 0.35", target(signin / a >= 0.35, flagged)))
    rows.append(("", "", "", f"/(b) {signin / b:.3f}", "≥ 0.8", target(signin / b >= 0.8, flagged)))

    signup = num("signup.rate")
    count, flagged = errors("signup", "sign-up")
    rows.append(("sign-up, new Apple users", f"{signup:,.0f} req/s", str(count),
                 f"/(a) {signup / a:.3f}", "≥ 0.2", target(signup / a >= 0.2, flagged)))

    link = num("link.rate")
    pairs = min(float(v.get("link.link", 0)), float(v.get("link.unlink", 0))) / num("link.seconds")
    count, flagged = errors("link", "link + unlink")
    # Each link and each unlink is one request and counts once; the pairs are half as many.
    rows.append(("link + unlink, Facebook classic", f"{link:,.0f} req/s ({pairs:,.0f} pairs/s)", str(count),
                 f"/(a) {link / a:.3f}", "≥ 0.2", target(link / a >= 0.2, flagged)))

    refresh = num("refresh.rate")
    count, flagged = errors("refresh", "refresh")
    rows.append(("refresh", f"{refresh:,.0f} req/s", str(count),
                 f"/(a) {refresh / a:.3f}", "≥ 0.35", target(refresh / a >= 0.35, flagged)))

    paced = num("paced.rate")
    count, flagged = errors("paced", "sign-in at half rate")
    if paced < 0.9 * num("paced.target"):
        flagged = True
        notes.append(f"! sign-in at half rate: {paced:,.0f} req/s done of {num('paced.target'):,.0f}/s asked")
    p99 = num("paced.p99_ms")
    rows.append((f"sign-in at half max: {num('paced.target'):,.0f}/s asked",
                 f"p50 {num('paced.p50_ms'):.2f} / p95 {num('paced.p95_ms'):.2f} / p99 {p99:.2f} ms", str(count),
                 f"{paced:,.0f} req/s done", "p99 ≤ 10 ms", target(p99 <= 10, flagged)))

    per_thousand = 1000 / num("signin.ok")
    tether_cpu = num("cpu.tether") * per_thousand
    postgres_cpu = num("cpu.postgres") * per_thousand
    rows.append(("tether CPU per 1,000 sign-ins", f"{tether_cpu:.2f} s", "",
                 f"{tether_cpu:.2f} ms a sign-in", "≤ 0.3 ms", target(tether_cpu <= 0.3)))
    rows.append(("PostgreSQL CPU per 1,000 sign-ins", f"{postgres_cpu:.2f} s", "",
                 f"{postgres_cpu:.2f} ms a sign-in", "", ""))

    rows.append(("tether RSS idle (before any load)", f"{num('rss.idle'):.1f} MB", "", "", "≤ 50 MB",
                 target(num("rss.idle") <= 50)))
    rows.append(("tether RSS after the run", f"{num('rss.after'):.1f} MB", "", "", "≤ 150 MB",
                 target(num("rss.after") <= 150)))

    if "replay.events" in v:
        copy = num("replay.copy_rate")
        rows.append((f"raw COPY of the events table ({int(num('replay.events')):,} events)", f"{copy:,.0f} events/s", "",
                     f"mean: {num('replay.copy_rate_before'):,.0f} before, {num('replay.copy_rate_after'):,.0f} after"
                     if "replay.copy_rate_before" in v else "", "", ""))
        for key, label in (("replace", "tether replay"), ("verify", "tether replay --verify")):
            rate = num(f"replay.{key}_rate")
            rows.append((label, f"{rate:,.0f} events/s", "", f"/COPY {rate / copy:.3f}", "≥ 150,000/s" + (" and ≥ 0.5" if key == "replace" else ""),
                         target(rate >= 150_000 and (key == "verify" or rate / copy >= 0.5))))
        rows.append(("tether RSS, peak during the replays", f"{num('replay.rss'):.1f} MB", "", "", "≤ 200 MB",
                     target(num("replay.rss") <= 200)))

    if "history.events" in v:
        rows.append((f"history, {int(num('history.events')):,}-event user, full read",
                     f"p50 {num('history.full_p50_ms'):.2f} / p99 {num('history.full_p99_ms'):.2f} ms", "",
                     f"plain SELECT p50 {num('history.raw_full_p50_ms'):.2f} ms", "p99 ≤ 5 ms", target(num("history.full_p99_ms") <= 5)))
        rows.append(("history, first page of 50",
                     f"p50 {num('history.page_p50_ms'):.2f} / p99 {num('history.page_p99_ms'):.2f} ms", "",
                     f"plain SELECT p50 {num('history.raw_page_p50_ms'):.2f} ms", "p99 ≤ 2 ms", target(num("history.page_p99_ms") <= 2)))

    header = ("figure", "measured", "errors", "ratio / detail", "target", "holds")
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    line = lambda row: "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()

    print(f"Tether service benchmark, {v['date']}, commit {v['commit']}")
    idle = {key[len("idle."):]: float(value) for key, value in v.items() if key.startswith("idle.") and value}
    quietest = min(idle.values(), default=100.0)
    print(f"{v['cores']} cores ({v['cpu']}), {v['memory']} memory; machine idle in the second before each step:"
          f" {quietest:.0f}% at least; release build; all on 127.0.0.1")
    print(f"load: wrk -t2 -c16 ({v['duration']} s a scenario); baselines: pgbench -n -c16 -j2 -T{v['duration']};"
          " PostgreSQL 15 with fsync off (tether postgres start --throwaway)")
    print()
    print(line(header))
    print(line(tuple("-" * width for width in widths)))
    for row in rows:
        print(line(row))
    print()
    print(f"targets held: {held[0]} of {held[1]}")
    if quietest < 80:
        busy = ", ".join(f"{name} {value:.0f}%" for name, value in idle.items() if value < 80)
        notes.append(f"! the machine was busy with something else (idle in the second before: {busy}); the figures are noisy")
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
