#!/usr/bin/env python3
"""Prepares the credentials the load scenarios of scripts/bench.sh replay, before any load starts.

    setup.py users BASE OUT_DIR SIGN_IN_USERS LINK_USERS
        Mints one Apple identity token (no nonce, so it can be presented again) per
        sign-in user and signs each in once, so the load sees returning users. Writes:
          signin_tokens.txt   one identity token a line
          refresh_tokens.txt  the refresh token of that first sign-in's session, one a line
        For each link user: an Apple sign-in plus a classic Facebook access token of the
        dev identity provider's Graph API. Writes:
          link_users.txt      "<access token> <Facebook access token>" a line

    setup.py signup BASE OUT_DIR COUNT
        Mints COUNT identity tokens of Apple users Tether has never seen. Writes:
          signup_tokens.txt   one identity token a line

BASE is the server, such as http://127.0.0.1:18080. Only the standard library is used;
requests go over a few keep-alive connections in parallel. Any answer other than the
expected one fails the setup (exit 1) after two retries of a 5xx or a dropped connection.
"""
import concurrent.futures
import http.client
import json
import os
import secrets
import sys
import threading
import urllib.parse

WORKERS = 8
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
    write_lines(os.path.join(out, "signin_tokens.txt"), [token for token, _ in pairs])
    write_lines(os.path.join(out, "refresh_tokens.txt"), [refresh for _, refresh in pairs])

    def linker(index):
        session = sign_in(client, apple_token(client, "link", index))
        facebook = client.post(
            "/dev-idp/facebook/access-token",
            {"userId": f"9{index:08d}{RUN[:4].translate(str.maketrans('abcdef', '123456'))}", "email": f"fb{index}.{RUN}@bench.example"},
            expect={200},
        )
        return session["accessToken"] + " " + facebook["accessToken"]

    write_lines(os.path.join(out, "link_users.txt"), parallel(linker, link_users))


def signup(client, out, count):
    write_lines(os.path.join(out, "signup_tokens.txt"), parallel(lambda index: apple_token(client, "signup", index), count))


def main(argv):
    if len(argv) < 4 or argv[1] not in ("users", "signup"):
        print(__doc__, file=sys.stderr)
        return 2
    client = Client(argv[2])
    try:
        if argv[1] == "users":
            users(client, argv[3], int(argv[4]), int(argv[5]))
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
