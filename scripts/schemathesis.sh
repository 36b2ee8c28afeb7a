#!/usr/bin/env bash
# schemathesis (PyPI, pinned in Tests/schemathesis) against schema/openapi.yaml and a throwaway
# `tether dev`: the /v1 routes without and with a user's session, the admin API with an admin key,
# Parse, Firebase and the operations routes. SCHEMATHESIS_EXAMPLES examples per operation (make test
# runs 10; make fuzz more). Fails on any 5xx and on any answer the document does not describe: its
# status, content type, headers or body schema, or an operation that ignores its authentication;
# and (README "Hostile input") on a request the request schemas refuse that is not refused, or one
# they allow that is refused with 400 (positive_data_acceptance: not on Parse and Firebase, nor on
# the few operations below whose 400s depend on state).
set -euo pipefail
cd "$(dirname "$0")/.."

checkout=$PWD
tether="${SCHEMATHESIS_TETHER:-.build/debug/tether}"
st=".tether/schemathesis-venv/bin/st"
[ -x "$st" ] || { echo "schemathesis: $st is missing (make test installs it)" >&2; exit 1; }
examples="${SCHEMATHESIS_EXAMPLES:-10}"
source scripts/lib/throwaway-dev.sh
throwaway_dev_traps schemathesis

# Limits high enough that fuzzing does not mostly see 429s; the seeds give the admin routes users to read.
throwaway_dev_start schemathesis TETHER_LOG_LEVEL=info TETHER_SIGN_IN_FAILURE_LIMIT=100000
app="schemathesis"
user_token=$(python3 - "$base_url" <<'PY'
import json, sys, urllib.request
request = urllib.request.Request(sys.argv[1] + "/v1/sign-up", method="POST", headers={"Content-Type": "application/json"},
    data=json.dumps({"email": "schemathesis@example.com", "password": "a long enough password"}).encode())
print(json.load(urllib.request.urlopen(request, timeout=10))["session"]["accessToken"])
PY
)
# The feed's long poll (`wait`, up to 30 s) is held at 0 so no request outlives the client's timeout.
printf '[parameters]\n"path.projectId" = "%s-project"\n"path.appId" = "%s"\n"query.wait" = 0\n[auth]\nauto-signup = false\n' \
  "$app" "$app" >"$work/schemathesis.toml"
# positive_data_acceptance: a well-formed request may still meet an Idempotency-Key that an earlier
# generated request used with another body (422 idempotency_key_reused, the only 422 there is).
cat >>"$work/schemathesis.toml" <<'TOML'
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]
TOML

checks="not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,ignored_auth,missing_required_header"
failed=0
# run NAME EXTRA-CHECKS ARGS...: one schemathesis run; its output goes to $work/NAME.out, its summary to stdout.
run() {
  local name=$1 extra=$2
  shift 2
  local status=0
  # From $work, where schemathesis leaves its cache (.schemathesis/), not in the checkout.
  (cd "$work" && "$checkout/$st" --config-file schemathesis.toml run "$checkout/schema/openapi.yaml" --url "$base_url" \
    --checks "$checks$extra" --max-examples "$examples" --workers 1 --phases examples,coverage,fuzzing --request-timeout 10 \
    --seed 1 --output-truncate false "$@") >"$work/$name.out" 2>&1 || status=$?
  local tested cases
  tested=$(grep -E "^ *Tested: [0-9]+" "$work/$name.out" | tr -s ' ' | sed 's/^ //' || true)
  cases=$(grep -A1 "^Test cases:" "$work/$name.out" | tail -n 1 | tr -s ' ' | sed 's/^ //' || true)
  echo "schemathesis $name: ${tested:-Tested: ?} operations; test cases: ${cases:-?}; exit $status"
  if [ "$status" != 0 ]; then
    failed=1
    # `|| true`: head closing the pipe early must not end the script (pipefail) before the other runs.
    sed -n '/FAILURES/,$p' "$work/$name.out" | head -120 >&2 || true
  fi
}

# A method a path does not take is 405 with an `Allow` that lists exactly the document's methods,
# except on the Firebase surface (404, as Google answers).
methods=",unsupported_method,allow_header_conformance"
# positive_data_acceptance is left out (negative_data_rejection kept) for operations that answer 400 to
# well-formed requests for reasons of state the schema cannot say; they run apart: a `signed_request`
# that is not canonical base64url; an address that already is the user's, an eleventh second factor
# (the runs enrol many), recovery codes without a confirmed factor; an `after` that names no user or
# a point past the log's newest event, a webhook URL the server will not deliver to (checked against
# DNS and private ranges).
v1_state=(--exclude-name 'POST /v1/providers/facebook/data-deletion')
session_state=(--exclude-name 'POST /v1/users/me/email' --exclude-name 'POST /v1/users/me/mfa/totp'
  --exclude-name 'POST /v1/users/me/mfa/phone' --exclude-name 'POST /v1/users/me/mfa/recovery-codes')
admin_state=(--exclude-name 'GET /v1/admin/users' --exclude-name 'GET /v1/admin/events' --exclude-name 'POST /v1/admin/webhooks'
  --exclude-name 'POST /v1/admin/webhooks/{id}/replay')
run v1 ",positive_data_acceptance,negative_data_rejection$methods" --include-path-regex '^/v1/' --exclude-path-regex '^/v1/admin' "${v1_state[@]}"
run v1-state ",negative_data_rejection$methods" --include-name 'POST /v1/providers/facebook/data-deletion'
# With a session; the routes that end every session (and erase the user) are left out so it lives to the end.
run v1-session ",positive_data_acceptance,negative_data_rejection$methods" --include-path-regex '^/v1/(users/me|mfa)' \
  --exclude-path-regex '^/v1/users/me/sessions/revoke$' --exclude-name 'DELETE /v1/users/me' "${session_state[@]}" \
  -H "Authorization: Bearer $user_token"
run v1-session-state ",negative_data_rejection$methods" --include-path-regex '^/v1/users/me/(email|mfa/(totp|phone|recovery-codes))$' \
  -H "Authorization: Bearer $user_token"
# Last of the session's runs: its first request erases the user (the sign-up above is within five minutes).
run v1-erase ",positive_data_acceptance,negative_data_rejection" --include-name 'DELETE /v1/users/me' -H "Authorization: Bearer $user_token"
run admin ",positive_data_acceptance,negative_data_rejection$methods" --include-path-regex '^/v1/admin' "${admin_state[@]}" -H "Authorization: Bearer $admin_key"
run admin-state ",negative_data_rejection$methods" --include-path-regex '^/v1/admin/(users|events|webhooks|webhooks/\{id\}/replay)$' -H "Authorization: Bearer $admin_key"
# Parse and Firebase answer 400 to well-formed requests that name an unknown session, user, token or
# code (Parse's 101/206/209/252, Identity Toolkit's INVALID_ID_TOKEN, USER_NOT_FOUND, INVALID_OOB_CODE…),
# as the services they stand in for do: positive_data_acceptance cannot hold there and is left out.
run parse ",negative_data_rejection$methods" --include-path-regex '^/parse/' -H "X-Parse-Application-Id: $app"
run firebase ",negative_data_rejection" --include-path-regex '^/(identitytoolkit|securetoken|www)\.googleapis\.com/'
run firebase-admin ",negative_data_rejection" --include-path-regex '^/identitytoolkit\.googleapis\.com/v1/projects/' -H "Authorization: Bearer $admin_key"
run operations ",positive_data_acceptance,negative_data_rejection$methods" --include-path-regex '^/(healthz|readyz|metrics|\.well-known/)'
if grep -q '"status":5[0-9][0-9]' "$work/tether.log"; then
  echo "schemathesis: the server logged a 5xx:" >&2
  grep '"status":5[0-9][0-9]' "$work/tether.log" | head -20 >&2
  failed=1
fi
exit "$failed"
