#!/usr/bin/env bash
# Instances on PostgreSQL and Redis behind HAProxy (deploy/haproxy.cfg), on this machine:
#   DATABASE_URL=postgres://... REDIS_URL=redis://... deploy/run-local.sh
# starts them (Ctrl-C stops them all), and, from another terminal,
#   deploy/run-local.sh roll
# restarts its instances one at a time, each back in HAProxy's rotation before the next, so that
# no request fails. docs/deploy.md says more.
set -euo pipefail

# What this stack keeps while it runs: each instance's pid, the balancer's stats address, the
# self-signed certificate and the runtime API socket, unless given elsewhere. Removed on exit.
run_dir="${PETSTORE_RUN_DIR:-${TMPDIR:-/tmp}/petstore-local-$(id -u)}"
run_dir="$(realpath -m "$run_dir")"

say() { echo "run-local: $*" >&2; }
fail() {
  say "$*"
  exit 1
}

# The check state HAProxy's stats page gives server $1 (UP, DOWN, "UP 1/2" while changing, ...).
server_state() {
  curl -sf "http://$(cat "$run_dir/stats-address")/stats;csv" |
    awk -F, -v server="$1" '$1 == "instances" && $2 == server { print $18 }'
}

# Waits until server $1 is in state $2, for at most $3 seconds.
wait_for_state() {
  local deadline=$((SECONDS + $3))
  until [ "$(server_state "$1")" = "$2" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$1 is not $2 after $3 s (HAProxy says: $(server_state "$1"))"
    sleep 0.2
  done
}

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# deploy/run-local.sh roll: SIGTERM each instance in turn; run-local.sh starts it again once it
# has exited, and the next is stopped only when HAProxy has it back in rotation (UP).
roll() {
  [ -f "$run_dir/run-local.pid" ] && alive "$(cat "$run_dir/run-local.pid")" ||
    fail "no stack of deploy/run-local.sh is running with PETSTORE_RUN_DIR=$run_dir"
  local pidfile server pid
  for pidfile in "$run_dir"/instance*.pid; do
    server="$(basename "$pidfile" .pid)"
    [ "$(server_state "$server")" = UP ] || fail "$server is not UP in HAProxy; not rolling"
  done
  for pidfile in "$run_dir"/instance*.pid; do
    server="$(basename "$pidfile" .pid)"
    pid="$(cat "$pidfile")"
    say "$server (pid $pid): SIGTERM"
    kill -TERM "$pid"
    # Its /readyz answers 503 at once: two failed checks take it out while it still serves.
    wait_for_state "$server" DOWN 30
    local deadline=$((SECONDS + 60))
    while alive "$pid" || [ "$(cat "$pidfile")" = "$pid" ]; do
      [ "$SECONDS" -lt "$deadline" ] || fail "$server was not started again within 60 s"
      sleep 0.2
    done
    wait_for_state "$server" UP 60
    say "$server (pid $(cat "$pidfile")): back in rotation"
  done
}

if [ "${1:-}" = roll ]; then
  roll
  exit 0
fi
[ $# -eq 0 ] || fail "usage: deploy/run-local.sh [roll]"

: "${DATABASE_URL:?set DATABASE_URL to a PostgreSQL URL, e.g. postgres://postgres@127.0.0.1:5432/petstore}"
: "${REDIS_URL:?set REDIS_URL, e.g. redis://127.0.0.1:6379}"
export PETSTORE_LB_ADDRESS="${PETSTORE_LB_ADDRESS:-127.0.0.1:8443}"
export PETSTORE_LB_STATS="${PETSTORE_LB_STATS:-127.0.0.1:8404}"
export PETSTORE_LB_ADMIN_SOCKET="${PETSTORE_LB_ADMIN_SOCKET:-$run_dir/admin.sock}"
read -r -a ports <<<"${PETSTORE_INSTANCE_PORTS:-3001 3002}"
[ "${#ports[@]}" -ge 2 ] && [ "${#ports[@]}" -le 4 ] || fail "PETSTORE_INSTANCE_PORTS names 2 to 4 ports"
# Relative to where the command was given, before the cd below.
[ -z "${PETSTORE_LB_CERT:-}" ] || PETSTORE_LB_CERT="$(realpath "$PETSTORE_LB_CERT")"
cd "$(dirname "$0")/.."

if [ -f "$run_dir/run-local.pid" ] && alive "$(cat "$run_dir/run-local.pid")"; then
  fail "a stack is running already with PETSTORE_RUN_DIR=$run_dir (pid $(cat "$run_dir/run-local.pid"))"
fi
mkdir -p -m 700 "$run_dir"
[ -O "$run_dir" ] || fail "$run_dir belongs to another user"
# Left by a stack that was killed: roll must not find instances this one does not have.
rm -f "$run_dir"/instance?.pid

supervisors=()
haproxy_pid=""
stop() {
  trap - EXIT INT TERM
  kill -TERM "${supervisors[@]}" 2>/dev/null || true
  local pids=("$haproxy_pid") pidfile
  for pidfile in "$run_dir"/instance*.pid; do [ -f "$pidfile" ] && pids+=("$(cat "$pidfile")"); done
  kill -TERM "${pids[@]}" 2>/dev/null || true
  # The instances finish their requests first (SHUTDOWN_DELAY_MS and then some).
  local deadline=$((SECONDS + 20)) pid
  for pid in "${pids[@]}"; do
    while alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
  done
  wait 2>/dev/null || true
  # HAProxy leaves its socket behind when stopped.
  [ -S "$PETSTORE_LB_ADMIN_SOCKET" ] && rm -f "$PETSTORE_LB_ADMIN_SOCKET"
  # Only what this script put there: PETSTORE_RUN_DIR may name a folder holding more.
  rm -f "$run_dir"/{run-local.pid,stats-address,instance?.pid,balancer.pem,balancer.key}
  rmdir "$run_dir" 2>/dev/null || true
}
trap stop EXIT
trap 'exit 0' INT TERM
echo $$ >"$run_dir/run-local.pid"
echo "$PETSTORE_LB_STATS" >"$run_dir/stats-address"

if [ -z "${PETSTORE_LB_CERT:-}" ]; then
  # A self-signed certificate for this machine alone: curl needs --cacert "$PETSTORE_LB_CERT" (or -k).
  PETSTORE_LB_CERT="$run_dir/balancer.pem"
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$run_dir/balancer.key" -out "$PETSTORE_LB_CERT" 2>/dev/null
  cat "$run_dir/balancer.key" >>"$PETSTORE_LB_CERT"
  rm "$run_dir/balancer.key"
fi
export PETSTORE_LB_CERT
[ -f dist/src/server.js ] || npm run -s build
node dist/scripts/create-database.js

# Answers /readyz on port $1, while pid $2 runs; false if it exited first.
until_ready() {
  until curl -sf "http://127.0.0.1:$1/readyz" >/dev/null; do
    alive "$2" || return 1
    sleep 0.2
  done
}

# Runs instance $1 on port $2, and starts it again, with the same settings, whenever it exits after
# having been ready (a rolling restart's SIGTERM, a crash). One that fails to start is left down.
supervise() {
  local n=$1 port=$2 pid status
  while :; do
    # The balancer connects from 127.0.0.1: the instances take the client's address from it alone.
    # SHUTDOWN_DELAY_MS: on SIGTERM, not ready but serving until HAProxy's checks take it out.
    HOST=127.0.0.1 PORT="$port" METRICS_PORT="${METRICS_PORT:-$((9464 + n))}" TRUST_PROXY=127.0.0.1 \
      SHUTDOWN_DELAY_MS=3000 PUBLIC_URL="https://$PETSTORE_LB_ADDRESS" node dist/src/server.js &
    pid=$!
    echo "$pid" >"$run_dir/instance$n.pid"
    until_ready "$port" "$pid" || {
      wait "$pid" || status=$?
      say "instance$n (pid $pid) failed to start (exit ${status:-0}); it stays down"
      return 1
    }
    status=0
    wait "$pid" || status=$?
    say "instance$n (pid $pid) exited ($status); starting it again"
  done
}

for i in "${!ports[@]}"; do
  n=$((i + 1))
  export "PETSTORE_INSTANCE_$n=127.0.0.1:${ports[$i]}"
  supervise "$n" "${ports[$i]}" &
  supervisors+=($!)
  # One at a time: on an empty database the first creates the development key and prints it.
  until [ -f "$run_dir/instance$n.pid" ] && curl -sf "http://127.0.0.1:${ports[$i]}/readyz" >/dev/null; do
    alive "${supervisors[-1]}" || exit 1
    sleep 0.2
  done
done
"$(command -v haproxy || echo /usr/sbin/haproxy)" -db -f deploy/haproxy.cfg &
haproxy_pid=$!
for i in "${!ports[@]}"; do
  until [ "$(server_state "instance$((i + 1))")" = UP ]; do
    alive "$haproxy_pid" || exit 1
    sleep 0.2
  done
done
echo "balancer: https://$PETSTORE_LB_ADDRESS/v1 (certificate: $PETSTORE_LB_CERT, stats:" \
  "http://$PETSTORE_LB_STATS/stats, runtime API: $PETSTORE_LB_ADMIN_SOCKET)"
echo "  curl --cacert $PETSTORE_LB_CERT -H \"Authorization: Bearer \$KEY\" https://$PETSTORE_LB_ADDRESS/v1/pets"
echo "  roll the instances: deploy/run-local.sh roll"
# HAProxy's exit ends the stack; an instance's is the business of its supervisor.
wait "$haproxy_pid"
