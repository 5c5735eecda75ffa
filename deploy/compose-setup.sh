#!/bin/sh
# The one-shot set-up of deploy/compose.yaml (run as the `setup` service): once the masters answer
# through the balancer, registers each storage node (the master gives it its id, written to
# /setup/node-N.toml for the node to start with), checks it with a signed ping, and creates a
# storage policy on each node and one on the S3 server. Runs again harmlessly: what exists is kept.
set -eu
api="${NUBO_API:-http://balancer:8080/api/v1}"
setup="${SETUP_DIR:-/setup}"
json() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }

tries=0
until curl -fs "$api/site/health" >/dev/null; do
  tries=$((tries + 1))
  [ "$tries" -lt "${SETUP_WAIT_TRIES:-150}" ] || { echo "no master answers $api/site/health" >&2; exit 1; }
  echo "waiting for the masters"; sleep 2
done
token=$(curl -fs "$api/user/session" -H 'content-type: application/json' \
  -d "{\"provider\":\"email_password\",\"identifier\":\"$NUBO_ADMIN_EMAIL\",\"credential\":\"$NUBO_ADMIN_PASSWORD\"}" \
  | json access_token)
post() { path="$1"; shift; curl -fs "$api$path" -H "authorization: Bearer $token" -H 'content-type: application/json' "$@"; }

for n in 1 2; do
  [ -s "$setup/node-$n.toml" ] && continue
  url=$(eval echo "\${NODE${n}_URL:-http://node-$n:5213}")
  id=$(post /admin/node -d "{\"name\":\"node-$n\",\"base_url\":\"$url\",\"key\":\"$NUBO_NODE_KEY\"}" | json id)
  post "/admin/policy" -d "{\"name\":\"on node-$n\",\"type\":\"local\",\"is_private\":true,\"node_id\":\"$id\"}" >/dev/null
  printf 'node_id = "%s"\n' "$id" > "$setup/node-$n.tmp" && mv "$setup/node-$n.tmp" "$setup/node-$n.toml"
  echo "node-$n registered as $id ($url)"
done
if [ ! -s "$setup/s3.policy" ]; then
  options="{\"endpoint\":\"$S3_ENDPOINT\",\"region\":\"us-east-1\",\"bucket\":\"$S3_BUCKET\",\"path_style\":true,\"access_key\":\"$S3_ACCESS_KEY\",\"secret_key\":\"$S3_SECRET_KEY\"}"
  post /admin/policy -d "{\"name\":\"on S3\",\"type\":\"s3\",\"is_private\":true,\"options\":$options}" \
    | json id > "$setup/s3.policy"
  echo "S3 policy $(cat "$setup/s3.policy")"
fi
echo "set-up done: give the policies to a group (Administration -> Groups) to use them"
