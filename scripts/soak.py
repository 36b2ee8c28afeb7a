#!/usr/bin/env python3
"""Mixed load against a running `tether dev` for scripts/soak.sh (make soak).

    soak.py URL TETHER_PID DATABASE_URL ADMIN_KEY SECONDS

Eight workers, each a keep-alive connection, loop over: /v1 Apple sign-ins of new and returning
users (the oldest of a worker's sessions signed out once it holds more than 12), refreshes, Google
links and unlinks, TOTP sign-ins through a challenge (their sessions join the worker's, and are
signed out likewise), Parse log-ins with Apple authData (and log-outs, likewise), Firebase
signInWithIdp and, mostly, Firebase token refreshes (Firebase apps do not sign out: those sessions
stay live, up to Tether's 100 a user). A webhook subscription delivers every public event to a
receiver in this process. Every SAMPLE seconds it reads tether's resident memory, open file
descriptors and database connections, and from /metrics malloc's bytes in use and held and the
users' states kept (so that growth can be told apart: live heap, kept states, or what malloc keeps);
at the end it prints the samples and the second half's growth a minute, and fails (exit 1) on any
5xx, on an unexpected answer, on undelivered webhooks, or when memory, descriptors or connections
did not stay flat: in runs of ten minutes or more whose kept states reached their bound, that includes
the live heap (malloc's bytes in use less the kept states) growing by more than 0.1 MB a minute over
the second half.
"""
import base64
import hashlib
import hmac
import http.client
import http.server
import json
import os
import random
import secrets
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

WORKERS = 8
SAMPLE = 10
RUN = secrets.token_hex(4)


class Failure(Exception):
    pass


class Client:
    def __init__(self, base):
        url = urllib.parse.urlsplit(base)
        self.connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)

    def call(self, method, path, body=None, headers=None, expect=(200,), raw=False):
        data = None if body is None else json.dumps(body).encode()
        all_headers = {"Content-Type": "application/json"} if data is not None else {}
        all_headers.update(headers or {})
        try:
            self.connection.request(method, path, body=data, headers=all_headers)
            response = self.connection.getresponse()
            text = response.read()
        except (OSError, http.client.HTTPException) as error:
            self.connection.close()
            raise Failure(f"{method} {path}: {error}")
        if response.status not in expect:
            raise Failure(f"{method} {path}: {response.status} {text[:200].decode(errors='replace')}")
        if raw:
            return text.decode()
        return json.loads(text) if text else None


def totp(secret, step):
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    digest = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    return f"{(struct.unpack('>I', digest[offset:offset + 4])[0] & 0x7FFFFFFF) % 1_000_000:06d}"


def used_step(secret, step):
    """The step Tether records for the code of `step`: the latest step its window (one step either side of
    the server's time, which may already be the next step) finds the same six digits in. Neighbouring steps
    share a code about once in a million, and the later step's code then counts as used."""
    return max(candidate for candidate in range(step - 1, step + 3) if totp(secret, candidate) == totp(secret, step))


class Receiver(http.server.BaseHTTPRequestHandler):
    delivered = 0
    lock = threading.Lock()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with Receiver.lock:
            Receiver.delivered += 1
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


GAUGES = {"tether_malloc_in_use_bytes": "heap_mb", "tether_malloc_held_bytes": "held_mb", "tether_account_states_kept": "states",
          "tether_account_states_kept_bytes": "states_mb"}


def gauges(base):
    """From tether's /metrics: malloc's bytes in use and held, and the users' states kept between commands (how
    many, and their estimated size), in MB but the count."""
    values = {}
    for line in Client(base).call("GET", "/metrics", raw=True).splitlines():
        name, _, value = line.partition(" ")
        if name in GAUGES:
            key = GAUGES[name]
            values[key] = int(float(value)) if key == "states" else round(float(value) / 1e6, 1)
    return values


# Runs of at least this long check that the live heap stays flat (a shorter one is mostly warming up), to this slope.
LIVE_HEAP_CHECK_SECONDS = 600
LIVE_HEAP_GROWTH_LIMIT = 0.1
# Kept states growing slower than this (MB a minute) are at their bound.
BOUNDED_STATES_SLOPE = 0.02


def slope(xs, ys):
    """The least-squares slope of ys over xs."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread else 0.0


def sample(pid, database_url, base):
    with open(f"/proc/{pid}/status") as status:
        fields = {line.split(":")[0]: line.split()[1] for line in status if line.startswith(("VmRSS:", "RssAnon:"))}
    # The resident set, and of it what is not a mapped file (the code and libraries, whose pages come and go with use).
    rss, anon = int(fields["VmRSS"]) / 1000, int(fields["RssAnon"]) / 1000 if "RssAnon" in fields else None
    descriptors = len(os.listdir(f"/proc/{pid}/fd"))
    connections = int(subprocess.run(
        ["/usr/lib/postgresql/15/bin/psql", database_url, "-qAt", "-c",
         "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"],
        check=True, capture_output=True, text=True).stdout.strip())
    return {"rss_mb": round(rss, 1), "anon_mb": None if anon is None else round(anon, 1), "fds": descriptors, "db_connections": connections, **gauges(base),
            "minute": round(time.monotonic() / 60, 3)}


def main(argv):
    if len(argv) != 6:
        sys.exit(__doc__)
    base, pid, database_url, admin_key, seconds = argv[1], int(argv[2]), argv[3], argv[4], float(argv[5])
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    setup = Client(base)
    admin = {"Authorization": "Bearer " + admin_key}
    setup.call("POST", "/v1/admin/webhooks", {"url": f"http://127.0.0.1:{receiver.server_port}/hook", "events": ["*"]},
               headers=admin, expect=(201,))

    def apple(sub):
        return setup.call("POST", "/dev-idp/apple/token", {"sub": sub})["identityToken"]

    # TOTP users, signed in through a challenge by the load: each worker has its own, and uses one at
    # most once per 30 s step (a code is accepted once), so no code is ever wrong or reused.
    totp_users = []
    for index in range(WORKERS * 6):
        sub = f"soak.{RUN}.totp.{index}"
        signed = setup.call("POST", "/v1/sign-in", {"provider": "apple", "credential": {"identityToken": apple(sub)}}, expect=(201,))
        bearer = {"Authorization": "Bearer " + signed["session"]["accessToken"]}
        factor = setup.call("POST", "/v1/users/me/mfa/totp", {"displayName": "soak"}, headers=bearer, expect=(201,))
        step = int(time.time()) // 30
        setup.call("POST", "/v1/users/me/mfa/totp/verify", {"factorId": factor["factorId"], "code": totp(factor["secret"], step)},
                   headers=bearer)
        totp_users.append((sub, factor, used_step(factor["secret"], step)))  # the step the enrolment used up

    counts = {}
    errors = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def worker(index):
        client, tokens, rng = Client(base), Client(base), random.Random(index)
        sessions = []
        parse_sessions, firebase_tokens = [], []
        mine = [(sub, factor) for sub, factor, _ in totp_users[index * 6:(index + 1) * 6]]
        last_step = {sub: step for sub, _, step in totp_users[index * 6:(index + 1) * 6]}
        while time.monotonic() < deadline:
            kind = rng.choice(["sign-in", "sign-in", "refresh", "link", "mfa", "parse", "firebase"])
            try:
                if kind == "sign-in" or (kind in ("refresh", "link") and not sessions):
                    kind = "sign-in"
                    sub = f"soak.{RUN}.{index}.{rng.randrange(200)}"
                    token = tokens.call("POST", "/dev-idp/apple/token", {"sub": sub})["identityToken"]
                    signed = client.call("POST", "/v1/sign-in", {"provider": "apple", "credential": {"identityToken": token}},
                                         expect=(200, 201))
                    sessions.append(signed["session"])
                    # Devices sign out as others sign in: the oldest session is refreshed (its access token may
                    # have expired) and signed out, so live sessions stay about as many as the workers hold.
                    if len(sessions) > 12:
                        oldest = sessions.pop(0)
                        fresh = client.call("POST", "/v1/sessions/refresh", {"refreshToken": oldest["refreshToken"]})["session"]
                        client.call("POST", "/v1/sign-out", headers={"Authorization": "Bearer " + fresh["accessToken"]}, expect=(204,))
                        with lock:
                            counts["sign-out"] = counts.get("sign-out", 0) + 1
                elif kind == "refresh":
                    session = sessions.pop(rng.randrange(len(sessions)))
                    sessions.append(client.call("POST", "/v1/sessions/refresh", {"refreshToken": session["refreshToken"]})["session"])
                elif kind == "link":
                    bearer = {"Authorization": "Bearer " + sessions[-1]["accessToken"]}
                    google = tokens.call("POST", "/dev-idp/google/token", {"sub": f"soak.{RUN}.g.{secrets.token_hex(6)}"})["idToken"]
                    client.call("POST", "/v1/users/me/identities", {"provider": "google", "credential": {"idToken": google}},
                                headers=bearer)
                    client.call("DELETE", "/v1/users/me/identities/google", headers=bearer)
                elif kind == "mfa":
                    step = int(time.time()) // 30
                    free = [user for user in mine if last_step.get(user[0], -1) < step]
                    if not free or time.time() % 30 > 25:  # no unused user this step, or the step is about to end
                        continue
                    sub, factor = free[0]
                    last_step[sub] = used_step(factor["secret"], step)
                    token = tokens.call("POST", "/dev-idp/apple/token", {"sub": sub})["identityToken"]
                    challenge = client.call("POST", "/v1/sign-in", {"provider": "apple", "credential": {"identityToken": token}},
                                            expect=(401,))
                    sessions.append(client.call("POST", "/v1/mfa/verify", {
                        "mfaPendingCredential": challenge["mfaPendingCredential"], "factorId": factor["factorId"],
                        "code": totp(factor["secret"], step)})["session"])
                elif kind == "parse":
                    sub = f"soak.{RUN}.parse.{index}.{rng.randrange(50)}"
                    token = tokens.call("POST", "/dev-idp/apple/token", {"sub": sub})["identityToken"]
                    user = client.call("POST", "/parse/users", {"authData": {"apple": {"id": sub, "token": token}}},
                                       headers={"X-Parse-Application-Id": "soak"}, expect=(200, 201))
                    parse_sessions.append(user["sessionToken"])
                    if len(parse_sessions) > 12:
                        client.call("POST", "/parse/logout", {}, expect=(200,), headers={
                            "X-Parse-Application-Id": "soak", "X-Parse-Session-Token": parse_sessions.pop(0)})
                elif firebase_tokens and rng.random() < 0.8:
                    # A Firebase app mostly refreshes its ID token; it signs in again now and then.
                    kind = "firebase-refresh"
                    client.call("POST", "/securetoken.googleapis.com/v1/token?key=soak",
                                {"grantType": "refresh_token", "refreshToken": rng.choice(firebase_tokens)})
                else:
                    sub = f"soak.{RUN}.firebase.{index}.{rng.randrange(50)}"
                    token = tokens.call("POST", "/dev-idp/apple/token", {"sub": sub})["identityToken"]
                    signed = client.call("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithIdp?key=soak",
                                         {"postBody": f"providerId=apple.com&id_token={token}", "requestUri": "http://localhost",
                                          "returnSecureToken": True})
                    firebase_tokens = (firebase_tokens + [signed["refreshToken"]])[-50:]
                with lock:
                    counts[kind] = counts.get(kind, 0) + 1
            except Failure as failure:
                with lock:
                    errors.append(f"{kind}: {failure}")
                client = Client(base)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(WORKERS)]
    for thread in threads:
        thread.start()
    samples = []
    time.sleep(min(5, seconds / 4))  # warmed up: caches, pools, key sets
    while any(thread.is_alive() for thread in threads):
        samples.append(sample(pid, database_url, base))
        for _ in range(SAMPLE * 10):
            if not any(thread.is_alive() for thread in threads):
                break
            time.sleep(0.1)
    for thread in threads:
        thread.join()
    samples.append(sample(pid, database_url, base))
    events = int(subprocess.run(
        ["/usr/lib/postgresql/15/bin/psql", database_url, "-qAt", "-c", "SELECT count(*) FROM events"],
        check=True, capture_output=True, text=True).stdout.strip())
    time.sleep(3)  # webhooks catch up
    first, last = samples[0], samples[-1]
    print(f"soak: {seconds:.0f} s, {sum(counts.values())} operations {dict(sorted(counts.items()))}, {len(errors)} errors, "
          f"{events} events, {Receiver.delivered} webhook deliveries")
    shown = lambda entry: {key: value for key, value in entry.items() if key != "minute"}
    print(f"soak: start {shown(first)}")
    print(f"soak: end   {shown(last)}")
    print("soak: resident MB every %d s: %s" % (SAMPLE, " ".join(str(entry["rss_mb"]) for entry in samples)))
    for key, what in (("anon_mb", "resident less mapped files, MB"), ("heap_mb", "malloc in use, MB"), ("held_mb", "malloc held, MB"), ("states_mb", "kept states, estimated MB")):
        print("soak: %s every %d s: %s" % (what, SAMPLE, " ".join(str(entry.get(key)) for entry in samples)))
    # Where the second half's growth went: the kept states are bounded (TETHER_STATE_CACHE_MB); the rest should not grow.
    middle = samples[len(samples) // 2]
    minutes = max((len(samples) - 1 - len(samples) // 2) * SAMPLE / 60, 1 / 60)
    print("soak: second half, MB a minute: resident %+.2f, of it not mapped files %+.2f, malloc in use %+.2f, malloc held %+.2f, "
          "kept states %+.2f" % tuple(((last.get(key) or 0) - (middle.get(key) or 0)) / minutes
                                      for key in ("rss_mb", "anon_mb", "heap_mb", "held_mb", "states_mb")))
    problems = list(errors[:5])
    # The live heap, the kept states (bounded by TETHER_STATE_CACHE_MB) aside, must not grow: its least-squares slope
    # over the second half, in runs long enough for one (measured: -0.05 MB a minute with libcurl for outbound HTTP;
    # +0.17 to +0.50 with the URLSession client, which leaked on every request).
    # Only once the kept states are at their bound (SOAK_STATE_CACHE_MB small enough): while they grow, so do their
    # dictionaries and malloc's overhead around them, which the estimate does not count (at the default budget, a
    # 12-minute run's states grew by 0.36 MB a minute and the rest by 0.29).
    if seconds >= LIVE_HEAP_CHECK_SECONDS and all(entry.get("heap_mb") is not None for entry in samples):
        half = samples[len(samples) // 2:]
        times = [entry["minute"] for entry in half]
        states_growth = slope(times, [entry.get("states_mb", 0) for entry in half])
        growth = slope(times, [entry["heap_mb"] - entry.get("states_mb", 0) for entry in half])
        if states_growth > BOUNDED_STATES_SLOPE:
            print("soak: live heap not checked: the kept states still grew by %+.3f MB a minute (their budget was not "
                  "reached; SOAK_STATE_CACHE_MB=2 reaches it)" % states_growth)
        else:
            print("soak: second half, live heap (malloc in use less the kept states): %+.3f MB a minute (limit %+.2f)" % (
                growth, LIVE_HEAP_GROWTH_LIMIT))
            if growth > LIVE_HEAP_GROWTH_LIMIT:
                problems.append(f"the live heap grew by {growth:.3f} MB a minute over the second half")
    if last["rss_mb"] > max(first["rss_mb"] * 1.5, first["rss_mb"] + 40):
        problems.append(f"memory grew from {first['rss_mb']} to {last['rss_mb']} MB")
    if last["fds"] > first["fds"] + 32:
        problems.append(f"file descriptors grew from {first['fds']} to {last['fds']}")
    if last["db_connections"] > max(first["db_connections"] + 4, 20):
        problems.append(f"database connections grew from {first['db_connections']} to {last['db_connections']}")
    if Receiver.delivered == 0:
        problems.append("no webhook was delivered")
    if problems:
        print("soak: FAILED: " + "; ".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv)
