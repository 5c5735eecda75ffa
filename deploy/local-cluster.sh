#!/usr/bin/env bash
# Starts a demo cluster on 127.0.0.1: one master (5212) and two storage nodes (5213, 5214),
# registers the nodes with the master and checks them with a signed ping. Everything lives in
# ./cluster-data; stop it with Ctrl-C. Needs the binaries (cargo build --release --workspace --bins)
# and python3 for JSON.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${NUBO_BIN:-$here/target/release}"
data="${CLUSTER_DATA:-$PWD/cluster-data}"
mkdir -p "$data"
[ -s "$data/secret" ] || head -c 48 /dev/urandom | base64 > "$data/secret"
admin_password="${NUBO_ADMIN_PASSWORD:-cluster-admin-password}"

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

NUBO_SECRET_FILE="$data/secret" NUBO_DATA_DIR="$data/master" NUBO_LISTEN=127.0.0.1:5212 \
  NUBO_ADMIN_EMAIL=admin@cluster.local NUBO_ADMIN_PASSWORD="$admin_password" \
  "$bin/nubo-master" serve &
pids+=($!)
api=http://127.0.0.1:5212/api/v1
for _ in $(seq 100); do curl -fs "$api/site/ping" >/dev/null && break; sleep 0.1; done

json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }
token=$(curl -fs "$api/user/session" -H 'content-type: application/json' \
  -d "{\"provider\":\"email_password\",\"identifier\":\"admin@cluster.local\",\"credential\":\"$admin_password\"}" | json "['access_token']")

for n in 1 2; do
  port=$((5212 + n))
  key_file="$data/node$n.key"
  [ -s "$key_file" ] || head -c 48 /dev/urandom | base64 > "$key_file"
  id_file="$data/node$n.id"
  if [ ! -s "$id_file" ]; then
    # 1. Register the node with the master (the answer carries its id).
    curl -fs "$api/admin/node" -H "authorization: Bearer $token" -H 'content-type: application/json' \
      -d "{\"name\":\"node$n\",\"base_url\":\"http://127.0.0.1:$port\",\"key\":\"$(cat "$key_file")\"}" | json "['id']" > "$id_file"
  fi
  # 2. Start the node with that id and the same key.
  NUBO_NODE_ID="$(cat "$id_file")" NUBO_NODE_KEY_FILE="$key_file" NUBO_DATA_DIR="$data/node$n" \
    NUBO_LISTEN="127.0.0.1:$port" NUBO_MASTER_URL=http://127.0.0.1:5212 "$bin/nubo-slave" &
  pids+=($!)
done
sleep 1
for n in 1 2; do
  # 3. Check it: a signed ping from the master.
  echo "node$n: $(curl -fs -X POST "$api/admin/node/$(cat "$data/node$n.id")/test" -H "authorization: Bearer $token")"
  # 4. A storage policy on the node (once), so files can be kept there.
  policy_file="$data/node$n.policy"
  if [ ! -s "$policy_file" ]; then
    curl -fs "$api/admin/policy" -H "authorization: Bearer $token" -H 'content-type: application/json' \
      -d "{\"name\":\"on node$n\",\"type\":\"local\",\"node_id\":\"$(cat "$data/node$n.id")\"}" | json "['id']" > "$policy_file"
  fi
  echo "policy on node$n: $(cat "$policy_file") (give it to a group: PUT $api/admin/group/{id} with policy_ids)"
done
echo "master on http://127.0.0.1:5212 (admin@cluster.local / $admin_password); Ctrl-C stops everything"
wait
