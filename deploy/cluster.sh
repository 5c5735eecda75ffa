#!/usr/bin/env bash
# Starts by hand the topology the cluster tests run (tests/src/topology.rs): two masters on one
# PostgreSQL database and a private Redis, nginx in front of them (round-robin, no stickiness),
# two storage nodes and an S3 server, with a storage policy on each node and one on S3.
#
#   balancer  http://127.0.0.1:5210   (the address to use)
#   masters   127.0.0.1:5211, 5212    nodes 127.0.0.1:5213, 5214
#   redis     127.0.0.1:6390          s3    http://127.0.0.1:5215
#
# Needs the binaries (cargo build --release -p nubo-master -p nubo-slave -p nubo-tests --bins;
# NUBO_BIN names another directory), redis-server, nginx, PostgreSQL on 127.0.0.1:5432 (user
# postgres; NUBO_CLUSTER_DB names the database, created if missing) and python3 for JSON.
# Everything lives in ./cluster-data (CLUSTER_DATA); Ctrl-C stops everything. The environment
# variables are the ones the harness sets (nubo_tests::topology::env).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${NUBO_BIN:-$here/target/release}"
data="${CLUSTER_DATA:-$PWD/cluster-data}"
db_name="${NUBO_CLUSTER_DB:-nubo_cluster}"
pg="postgres://postgres@127.0.0.1:5432"
admin_email=admin@cluster.local
admin_password="${NUBO_ADMIN_PASSWORD:-cluster-admin-password}"
nginx="$(command -v nginx || echo /usr/sbin/nginx)"
for program in "$bin/nubo-master" "$bin/nubo-slave" "$bin/nubo-s3-server"; do
  [ -x "$program" ] || { echo "$program is missing: cargo build --release -p nubo-master -p nubo-slave -p nubo-tests --bins" >&2; exit 1; }
done
mkdir -p "$data/logs" "$data/nginx" "$data/s3" "$data/master"
[ -s "$data/secret" ] || head -c 48 /dev/urandom | base64 > "$data/secret"
[ -s "$data/node.key" ] || head -c 48 /dev/urandom | base64 > "$data/node.key"
[ -s "$data/s3.keys" ] || echo "AK$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n') SK$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$data/s3.keys"
read -r s3_access s3_secret < "$data/s3.keys"
psql -q "$pg/postgres" -tc "SELECT 1 FROM pg_database WHERE datname = '$db_name'" | grep -q 1 \
  || psql -q "$pg/postgres" -c "CREATE DATABASE $db_name"

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
wait_for() { for _ in $(seq 300); do curl -fs "$1" >/dev/null 2>&1 && return; sleep 0.1; done; echo "$1 does not answer" >&2; exit 1; }
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 does not answer" >&2; exit 1; }

redis-server --bind 127.0.0.1 --port 6390 --save "" --appendonly no > "$data/logs/redis.log" 2>&1 &
pids+=($!)
"$bin/nubo-s3-server" --listen 127.0.0.1:5215 --dir "$data/s3" --bucket nubo \
  --access-key "$s3_access" --secret-key "$s3_secret" > "$data/logs/s3.log" 2>&1 &
pids+=($!)
wait_port 6390
wait_port 5215

# The masters share the secret, the database, Redis and the data directory. The first creates
# the schema and the administrator; the second starts once it answers.
for port in 5211 5212; do
  NUBO_LISTEN="127.0.0.1:$port" NUBO_DATA_DIR="$data/master" NUBO_DATABASE_URL="$pg/$db_name" \
    NUBO_REDIS_URL=redis://127.0.0.1:6390 NUBO_REDIS_PREFIX=nubo: NUBO_SECRET_FILE="$data/secret" \
    NUBO_ADMIN_EMAIL="$admin_email" NUBO_ADMIN_PASSWORD="$admin_password" NUBO_TRUSTED_PROXIES=127.0.0.1 \
    "$bin/nubo-master" serve > "$data/logs/master-$port.log" 2>&1 &
  pids+=($!)
  wait_for "http://127.0.0.1:$port/api/v1/site/ping"
done

user_line=""
[ "$(id -u)" = 0 ] && user_line="user root;\n"
upstreams="        server 127.0.0.1:5211 max_fails=1 fail_timeout=1s;\n        server 127.0.0.1:5212 max_fails=1 fail_timeout=1s;"
sed -e "s|@USER@|$user_line|" -e "s|@DIR@|$data/nginx|g" -e "s|@LISTEN@|127.0.0.1:5210|" \
  -e "s|@UPSTREAMS@|$upstreams|" "$here/deploy/nginx-cluster.conf.in" > "$data/nginx/nginx.conf"
"$nginx" -p "$data/nginx" -e "$data/nginx/error.log" -c "$data/nginx/nginx.conf" > "$data/logs/balancer.log" 2>&1 &
pids+=($!)
api=http://127.0.0.1:5210/api/v1
wait_for "$api/site/ping"

json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }
token=$(curl -fs "$api/user/session" -H 'content-type: application/json' \
  -d "{\"provider\":\"email_password\",\"identifier\":\"$admin_email\",\"credential\":\"$admin_password\"}" | json "['access_token']")
call() { curl -fs "$api$2" -X "$1" -H "authorization: Bearer $token" -H 'content-type: application/json' ${3:+-d "$3"}; }

policies=()
for n in 1 2; do
  port=$((5212 + n))
  id_file="$data/node$n.id"
  # 1. Register the node with the masters (the answer carries its id), once.
  [ -s "$id_file" ] || call POST /admin/node \
    "{\"name\":\"node$n\",\"base_url\":\"http://127.0.0.1:$port\",\"key\":\"$(cat "$data/node.key")\"}" | json "['id']" > "$id_file"
  # 2. Start it with that id; it reports to the masters through the balancer.
  NUBO_LISTEN="127.0.0.1:$port" NUBO_DATA_DIR="$data/node$n" NUBO_NODE_ID="$(cat "$id_file")" \
    NUBO_NODE_KEY_FILE="$data/node.key" NUBO_MASTER_URL=http://127.0.0.1:5210 \
    "$bin/nubo-slave" > "$data/logs/node$n.log" 2>&1 &
  pids+=($!)
  wait_port "$port"
  echo "node$n: $(call POST "/admin/node/$(cat "$id_file")/test")"
  # 3. A policy on it, once.
  policy_file="$data/node$n.policy"
  [ -s "$policy_file" ] || call POST /admin/policy \
    "{\"name\":\"on node$n\",\"type\":\"local\",\"node_id\":\"$(cat "$id_file")\"}" | json "['id']" > "$policy_file"
  policies+=("$(cat "$policy_file")")
done
if [ ! -s "$data/s3.policy" ]; then
  call POST /admin/policy "{\"name\":\"on s3\",\"type\":\"s3\",\"chunk_size\":8388608,\"options\":{\"endpoint\":\"http://127.0.0.1:5215\",\"region\":\"us-east-1\",\"bucket\":\"nubo\",\"path_style\":true,\"access_key\":\"$s3_access\",\"secret_key\":\"$s3_secret\"}}" \
    | json "['id']" > "$data/s3.policy"
fi
policies+=("$(cat "$data/s3.policy")")
echo "policies: ${policies[*]} (give them to a group: PUT $api/admin/group/{id} with policy_ids)"
echo "cluster on http://127.0.0.1:5210 ($admin_email / $admin_password); logs in $data/logs; Ctrl-C stops everything"
wait
