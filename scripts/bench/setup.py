#!/usr/bin/env python3
"""Prepares the credentials the load scenarios of scripts/bench.sh replay, before any load starts.

    setup.py users BASE OUT_DIR SIGN_IN_USERS LINK_USERS
        Mints one Apple identity token (no nonce, so it can be presented again) per
        sign-in user and signs each in once, so the load sees returning users. Writes:
          signin_tokens.txt   one identity token a line
          refresh_tokens.txt  the refresh token of that first sign-in's session, one a line
        For each link user: an Apple sign-in plus a classic Facebook access token of the
        dev identity provider's Graph API. Writes:
          link_users.txt      "<access token> <Facebook access token> ..." a line (one token per link)

    setup.py remint BASE OUT_DIR COUNT
        Mints fresh identity tokens for the first COUNT sign-in users of the `users` run whose
        files are in OUT_DIR (its run id is in run.txt), and writes them over signin_tokens.txt:
        Apple's tokens are refused 10 minutes after they were issued, and a long run outlives them.

    setup.py signup BASE OUT_DIR COUNT
        Mints COUNT identity tokens of Apple users Tether has never seen. Writes:
          signup_tokens.txt   one identity token a line

    setup.py mfa BASE OUT_DIR COUNT
        Writes second-factor events into the log (for the replay rows; no file): COUNT new Apple
        users each enrol a TOTP factor and confirm it with its code, then sign in again, give one
        wrong code to the challenge and finish it with a recovery code.

BASE is the server, such as http://127.0.0.1:18080. Only the standard library is used;
requests go over a few keep-alive connections in parallel. Any answer other than the
expected one fails the setup (exit 1) after two retries of a 5xx or a dropped connection.
"""
import base64
import concurrent.futures
import hashlib
import hmac
import http.client
import json
import os
import secrets
import struct
import sys
import threading
import time
import urllib.parse

WORKERS = 8
LINK_TOKENS = 48  # Facebook tokens a link user has: one per link (a user out of them stops: "exhausted");
#   256 users of 24 ran out within the 10 s at 1,218 requests a second (cc3d348), so 48 leave room to about 2,400
RUN = secrets.token_hex(4)  # keeps subjects and emails unique if the dev keys or a database are reused


class SetupError(Exception):
    pass


class Client:
    """One keep-alive HTTP connection per worker thread."""

    def __init__(self, base):
        url = urllib.parse.urlsplit(base)
        self.host, self.port = url.hostname, url.port
        self.local = threading.local()
        self.retries = 0
        self.lock = threading.Lock()

    def _connection(self):
        if getattr(self.local, "connection", None) is None:
            self.local.connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        return self.local.connection

    def post(self, path, body, expect, headers=None):
        data = json.dumps(body).encode()
        all_headers = {"Content-Type": "application/json"}
        all_headers.update(headers or {})
        for attempt in range(3):
            try:
                connection = self._connection()
                connection.request("POST", path, body=data, headers=all_headers)
                response = connection.getresponse()
                text = response.read()
            except (OSError, http.client.HTTPException) as error:
                self.local.connection = None
                if attempt == 2:
                    raise SetupError(f"POST {path}: {error}")
                with self.lock:
                    self.retries += 1
                continue
            if response.status in expect:
                return json.loads(text) if text else None
            if response.status >= 500 and attempt < 2:
                with self.lock:
                    self.retries += 1
                continue
            raise SetupError(f"POST {path}: {response.status} {text[:300].decode(errors='replace')}")
        raise SetupError(f"POST {path}: no answer")


def apple_token(client, kind, index):
    answer = client.post(
        "/dev-idp/apple/token",
        {"sub": f"bench.{RUN}.{kind}.{index:06d}", "email": f"{kind}{index}.{RUN}@bench.example", "emailVerified": True},
        expect={200},
    )
    return answer["identityToken"]


def sign_in(client, token):
    answer = client.post("/v1/sign-in", {"provider": "apple", "credential": {"identityToken": token}}, expect={200, 201})
    return answer["session"]


def parallel(function, count):
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(function, range(count)))


def write_lines(path, lines):
    with open(path, "w") as file:
        for line in lines:
            file.write(line + "\n")


def users(client, out, sign_in_users, link_users):
    def returning(index):
        token = apple_token(client, "signin", index)
        return token, sign_in(client, token)["refreshToken"]

    pairs = parallel(returning, sign_in_users)
    write_lines(os.path.join(out, "run.txt"), [RUN])
    write_lines(os.path.join(out, "signin_tokens.txt"), [token for token, _ in pairs])
    write_lines(os.path.join(out, "refresh_tokens.txt"), [refresh for _, refresh in pairs])

    def linker(index):
        session = sign_in(client, apple_token(client, "link", index))
        # Unlinking Facebook revokes the app's permissions, and with them every token of that Facebook user:
        # each link takes a token of another Facebook user of its own.
        run = RUN[:4].translate(str.maketrans('abcdef', '123456'))
        facebook = [client.post(
            "/dev-idp/facebook/access-token",
            {"userId": f"9{index:05d}{link:03d}{run}", "email": f"fb{index}.{link}.{RUN}@bench.example"},
            expect={200},
        )["accessToken"] for link in range(LINK_TOKENS)]
        return session["accessToken"] + " " + " ".join(facebook)

    write_lines(os.path.join(out, "link_users.txt"), parallel(linker, link_users))


def remint(client, out, count):
    global RUN
    with open(os.path.join(out, "run.txt")) as file:
        RUN = file.read().strip()
    write_lines(os.path.join(out, "signin_tokens.txt"), parallel(lambda index: apple_token(client, "signin", index), count))


def signup(client, out, count):
    write_lines(os.path.join(out, "signup_tokens.txt"), parallel(lambda index: apple_token(client, "signup", index), count))


def totp(secret, step):
    """RFC 6238's six digits (HMAC-SHA1, 30 s steps) of the base32 `secret` at time step `step`."""
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    digest = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    return f"{(struct.unpack('>I', digest[offset:offset + 4])[0] & 0x7FFFFFFF) % 1_000_000:06d}"


def mfa(client, count):
    def one(index):
        token = apple_token(client, "mfa", index)
        bearer = {"Authorization": "Bearer " + sign_in(client, token)["accessToken"]}
        factor = client.post("/v1/users/me/mfa/totp", {"displayName": "bench"}, expect={201}, headers=bearer)
        confirmed = client.post(
            "/v1/users/me/mfa/totp/verify",
            {"factorId": factor["factorId"], "code": totp(factor["secret"], int(time.time()) // 30)},
            expect={200}, headers=bearer)
        challenge = client.post("/v1/sign-in", {"provider": "apple", "credential": {"identityToken": token}}, expect={401})
        pending = {"mfaPendingCredential": challenge["mfaPendingCredential"]}
        now = int(time.time()) // 30
        accepted = {totp(factor["secret"], now + shift) for shift in (-1, 0, 1)}
        wrong = next(code for code in ("000000", "000001", "000002", "000003") if code not in accepted)
        client.post("/v1/mfa/verify", dict(pending, factorId=factor["factorId"], code=wrong), expect={401})
        client.post("/v1/mfa/verify", dict(pending, recoveryCode=confirmed["recoveryCodes"][0]), expect={200})

    parallel(one, count)


def main(argv):
    if len(argv) < 4 or argv[1] not in ("users", "remint", "signup", "mfa"):
        print(__doc__, file=sys.stderr)
        return 2
    client = Client(argv[2])
    try:
        if argv[1] == "users":
            users(client, argv[3], int(argv[4]), int(argv[5]))
        elif argv[1] == "mfa":
            mfa(client, int(argv[4]))
        elif argv[1] == "remint":
            remint(client, argv[3], int(argv[4]))
        else:
            signup(client, argv[3], int(argv[4]))
    except SetupError as error:
        print(f"bench setup failed: {error}", file=sys.stderr)
        return 1
    if client.retries:
        print(f"bench setup: {client.retries} request(s) retried after a 5xx or a dropped connection", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
