#!/usr/bin/env bash
# Property tests of the whole OpenAPI document with schemathesis against a real nubo-master
# (SQLite, a temporary data directory, an administrator's token), every check, a bounded number
# of examples per operation. Exits non-zero on any failure. Accepted exceptions and the reasons
# for them: .ci/schemathesis.toml.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/nubo/target}"
# Cases per operation and phase: enough to find the common mistakes, few enough that the run
# stays within about five minutes on a two-core machine.
MAX_EXAMPLES="${NUBO_SCHEMATHESIS_EXAMPLES:-10}"
ST_VERSION=4.32.5
VENV="$HOME/.cache/nubo/schemathesis-$ST_VERSION"

if [ ! -x "$VENV/bin/st" ]; then
  echo "installing schemathesis $ST_VERSION"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "schemathesis==$ST_VERSION"
fi

cargo build -q -p nubo-master

DATA="$(mktemp -d)"
MASTER_PID=""
cleanup() {
  if [ -n "$MASTER_PID" ]; then kill "$MASTER_PID" 2>/dev/null || true; wait "$MASTER_PID" 2>/dev/null || true; fi
  rm -rf "$DATA"
}
trap cleanup EXIT

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
BASE="http://127.0.0.1:$PORT/api/v1"
ADMIN_EMAIL="admin@schemathesis.test"
ADMIN_PASSWORD="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"

# Metrics on (a token nobody sends), so `GET /metrics` answers as documented: 401 without it.
NUBO_SECRET="$(head -c 48 /dev/urandom | base64)" \
  NUBO_METRICS_TOKEN="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')" \
  NUBO_DATA_DIR="$DATA" \
  NUBO_LISTEN="127.0.0.1:$PORT" \
  NUBO_ADMIN_EMAIL="$ADMIN_EMAIL" \
  NUBO_ADMIN_PASSWORD="$ADMIN_PASSWORD" \
  NUBO_LOG_LEVEL=warn \
  "$CARGO_TARGET_DIR/debug/nubo-master" serve >"$DATA/master.log" 2>&1 &
MASTER_PID=$!

for _ in $(seq 1 100); do
  if curl -fsS "$BASE/site/ping" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$MASTER_PID" 2>/dev/null; then cat "$DATA/master.log"; echo "nubo-master did not start"; exit 1; fi
  sleep 0.2
done

LOGIN_BODY="$(python3 -c 'import json, sys; print(json.dumps({"provider": "email_password", "identifier": sys.argv[1], "credential": sys.argv[2]}))' "$ADMIN_EMAIL" "$ADMIN_PASSWORD")"
TOKEN="$(curl -fsS -H 'content-type: application/json' -d "$LOGIN_BODY" "$BASE/user/session" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')"

# Operations on one user by id run on this ordinary user, never on the administrator: moving the
# administrator to another group would revoke the token the run uses.
USERS_GROUP="$(curl -fsS -H "Authorization: Bearer $TOKEN" "$BASE/admin/group" |
  python3 -c 'import json, sys; print(next(g["id"] for g in json.load(sys.stdin) if not g["is_admin"]))')"
TARGET_BODY="$(python3 -c 'import json, sys; print(json.dumps({"email": "target@schemathesis.test", "password": "target-password", "group_id": sys.argv[1]}))' "$USERS_GROUP")"
NUBO_ST_TARGET_USER="$(curl -fsS -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' -d "$TARGET_BODY" "$BASE/admin/user" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
export NUBO_ST_TARGET_USER
# Replacing a group runs on this group: a change to the administrators' group's claims would
# revoke the token the run uses.
NUBO_ST_TARGET_GROUP="$(curl -fsS -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
  -d '{"name": "schemathesis target", "max_storage": 1048576}' "$BASE/admin/group" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
export NUBO_ST_TARGET_GROUP

started=$SECONDS
status=0
# NETRC=/dev/null: a ~/.netrc entry for 127.0.0.1 would otherwise replace the bearer token.
NETRC=/dev/null "$VENV/bin/st" --config-file .ci/schemathesis.toml run "$BASE/openapi.json" \
  --url "http://127.0.0.1:$PORT" \
  --checks all \
  --max-examples "$MAX_EXAMPLES" \
  --seed "${NUBO_SCHEMATHESIS_SEED:-20260530}" \
  --header "Authorization: Bearer $TOKEN" || status=$?
echo "schemathesis: $((SECONDS - started)) s"

if [ "$status" -ne 0 ]; then
  echo "== master log (last 100 lines)"
  tail -n 100 "$DATA/master.log"
fi
exit "$status"
