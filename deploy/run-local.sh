#!/usr/bin/env bash
# Two instances on PostgreSQL and Redis behind HAProxy (deploy/haproxy.cfg), on this machine:
#   DATABASE_URL=postgres://... REDIS_URL=redis://... deploy/run-local.sh
# Clients use https://127.0.0.1:8443/v1; Ctrl-C stops all three. docs/deploy.md says more.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL to a PostgreSQL URL, e.g. postgres://postgres@127.0.0.1:5432/petstore}"
: "${REDIS_URL:?set REDIS_URL, e.g. redis://127.0.0.1:6379}"
export PETSTORE_LB_ADDRESS="${PETSTORE_LB_ADDRESS:-127.0.0.1:8443}"
ports=(3001 3002)

if [ -z "${PETSTORE_LB_CERT:-}" ]; then
  # A self-signed certificate for this machine alone: curl needs --cacert "$PETSTORE_LB_CERT" (or -k).
  PETSTORE_LB_CERT="$(mktemp -d)/balancer.pem"
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$PETSTORE_LB_CERT.key" -out "$PETSTORE_LB_CERT" 2>/dev/null
  cat "$PETSTORE_LB_CERT.key" >>"$PETSTORE_LB_CERT"
  echo "balancer certificate (self-signed): $PETSTORE_LB_CERT"
fi
export PETSTORE_LB_CERT
[ -f dist/src/server.js ] || npm run -s build

pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait' EXIT
trap 'exit 0' INT TERM
for i in 0 1; do
  # The balancer connects from 127.0.0.1: the instances take the client's address from it alone.
  # SHUTDOWN_DELAY_MS: on SIGTERM, not ready but serving until HAProxy's checks take it out.
  HOST=127.0.0.1 PORT=${ports[$i]} METRICS_PORT=$((9465 + i)) TRUST_PROXY=127.0.0.1 SHUTDOWN_DELAY_MS=3000 \
    PUBLIC_URL="https://$PETSTORE_LB_ADDRESS" node dist/src/server.js &
  pids+=($!)
  export "PETSTORE_INSTANCE_$((i + 1))=127.0.0.1:${ports[$i]}"
  # One at a time: on an empty database the first creates the development key and prints it.
  until curl -sf "http://127.0.0.1:${ports[$i]}/readyz" >/dev/null; do
    kill -0 "${pids[-1]}" 2>/dev/null || exit 1
    sleep 0.2
  done
done
"$(command -v haproxy || echo /usr/sbin/haproxy)" -db -f deploy/haproxy.cfg &
pids+=($!)
echo "balancer: https://$PETSTORE_LB_ADDRESS/v1 (stats: http://${PETSTORE_LB_STATS:-127.0.0.1:8404}/stats," \
  "runtime API: ${PETSTORE_LB_ADMIN_SOCKET:-/tmp/petstore-haproxy.sock})"
wait -n
