#!/usr/bin/env bash
# Instances on PostgreSQL and Redis behind HAProxy (deploy/haproxy.cfg), on this machine:
#   DATABASE_URL=postgres://... REDIS_URL=redis://... deploy/run-local.sh
# starts them (Ctrl-C stops them all), and, from another terminal,
#   deploy/run-local.sh roll
# replaces its instances one at a time with a surge: each replacement starts beside the instance it
# replaces, in HAProxy's spare slot for it, and the old one is drained and stopped only once the new
# one is in rotation, so never fewer instances serve than configured. Every line this script and
# HAProxy write starts with a UTC timestamp; the instances' own are JSON with a `time`.
# docs/deploy.md says more.
set -euo pipefail

# What this stack keeps while it runs: each instance's pid and slot, the balancer's stats address,
# the self-signed certificate and the runtime API socket, unless given elsewhere. Removed on exit.
run_dir="${PETSTORE_RUN_DIR:-${TMPDIR:-/tmp}/petstore-local-$(id -u)}"
run_dir="$(realpath -m "$run_dir")"

# printf's format for a timestamp of bash's own clock (no process per line): UTC, milliseconds.
STAMP='%(%Y-%m-%dT%H:%M:%S)T.%.3sZ'
say() {
  local now=$EPOCHREALTIME
  TZ=UTC printf "$STAMP run-local: %s\n" "${now%.*}" "${now#*.}" "$*" >&2
}
# Each line of its input, timestamped as the script's own (HAProxy's, the database's creation).
stamped() {
  local line now
  while IFS= read -r line; do
    now=$EPOCHREALTIME
    TZ=UTC printf "$STAMP %s\n" "${now%.*}" "${now#*.}" "$line"
  done
}
fail() {
  say "$*"
  exit 1
}

# The check state HAProxy's stats page gives server $1 (UP, DOWN, MAINT, DRAIN, "UP 1/2" while changing, ...).
server_state() {
  curl -sf "http://$(cat "$run_dir/stats-address")/stats;csv" |
    awk -F, -v server="$1" '$1 == "instances" && $2 == server { print $18 }'
}

# Whether server $1 reaches state $2 within $3 seconds.
reaches_state() {
  local deadline=$((SECONDS + $3))
  until [ "$(server_state "$1")" = "$2" ]; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# deploy/run-local.sh roll: asks each instance's supervisor in turn to replace it (SIGUSR1), and
# waits for the replacement to be in rotation and the old one stopped before the next.
roll() {
  [ -f "$run_dir/run-local.pid" ] && alive "$(cat "$run_dir/run-local.pid")" ||
    fail "no stack of deploy/run-local.sh is running with PETSTORE_RUN_DIR=$run_dir"
  local n supervisor outcome deadline
  for n in $(ls "$run_dir" | sed -n 's/^supervisor\([0-9]\)\.pid$/\1/p' | sort); do
    [ "$(server_state "$(cat "$run_dir/instance$n.slot")")" = UP ] || fail "instance$n is not UP in HAProxy; not rolling"
  done
  for n in $(ls "$run_dir" | sed -n 's/^supervisor\([0-9]\)\.pid$/\1/p' | sort); do
    supervisor="$(cat "$run_dir/supervisor$n.pid")"
    rm -f "$run_dir/instance$n.rolled"
    say "instance$n (pid $(cat "$run_dir/instance$n.pid"), $(cat "$run_dir/instance$n.slot")): starting its replacement"
    kill -USR1 "$supervisor"
    deadline=$((SECONDS + 120))
    until [ -s "$run_dir/instance$n.rolled" ]; do
      [ "$SECONDS" -lt "$deadline" ] && alive "$supervisor" || fail "instance$n was not replaced within 120 s"
      sleep 0.2
    done
    outcome="$(cat "$run_dir/instance$n.rolled")"
    [ "$outcome" = replaced ] || fail "instance$n: $outcome; not rolling the others"
    say "instance$n (pid $(cat "$run_dir/instance$n.pid"), $(cat "$run_dir/instance$n.slot")): in rotation, the old one draining"
  done
  deadline=$((SECONDS + 60))
  while compgen -G "$run_dir/instance?.old.pid" >/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "an old instance did not stop within 60 s: $(cat "$run_dir"/instance?.old.pid)"
    sleep 0.2
  done
  say "rolled: every old instance drained and stopped"
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
# Where each instance's replacement listens during a roll, beside it (then the next roll's, there).
read -r -a surge_ports <<<"${PETSTORE_SURGE_PORTS:-$(for port in "${ports[@]}"; do printf '%s ' $((port + 100)); done)}"
[ "${#surge_ports[@]}" -eq "${#ports[@]}" ] || fail "PETSTORE_SURGE_PORTS names as many ports as PETSTORE_INSTANCE_PORTS"
# Relative to where the command was given, before the cd below.
[ -z "${PETSTORE_LB_CERT:-}" ] || PETSTORE_LB_CERT="$(realpath "$PETSTORE_LB_CERT")"
cd "$(dirname "$0")/.."

if [ -f "$run_dir/run-local.pid" ] && alive "$(cat "$run_dir/run-local.pid")"; then
  fail "a stack is running already with PETSTORE_RUN_DIR=$run_dir (pid $(cat "$run_dir/run-local.pid"))"
fi
mkdir -p -m 700 "$run_dir"
[ -O "$run_dir" ] || fail "$run_dir belongs to another user"
# Left by a stack that was killed: roll must not find instances this one does not have.
rm -f "$run_dir"/{instance,supervisor}?.{pid,slot,rolled} "$run_dir"/instance?.{next,old}.pid

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
  rm -f "$run_dir"/{run-local.pid,stats-address,balancer.pem,balancer.key}
  rm -f "$run_dir"/{instance,supervisor}?.{pid,slot,rolled} "$run_dir"/instance?.{next,old}.pid
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
[ -f dist/src/server.js ] || npm run -s build 2>&1 | stamped
node dist/scripts/create-database.js 2>&1 | stamped

# Answers /readyz on port $1, while pid $2 runs; false if it exited first.
until_ready() {
  until curl -sf "http://127.0.0.1:$1/readyz" >/dev/null; do
    alive "$2" || return 1
    sleep 0.2
  done
}

# Instance $1 on port $2 with metrics on $3, in place of this (sub)shell. Started through this
# function, so that what bash prints of the job (its "Killed" line, say) is this call, never the
# settings and environment the instance is given.
run_instance() {
  # The balancer connects from 127.0.0.1: the instances take the client's address from it alone.
  # SHUTDOWN_DELAY_MS: on SIGTERM, not ready but serving until HAProxy's checks take it out.
  export HOST=127.0.0.1 PORT="$2" METRICS_PORT="${METRICS_PORT:-$3}" TRUST_PROXY=127.0.0.1 \
    SHUTDOWN_DELAY_MS=3000 PUBLIC_URL="https://$PETSTORE_LB_ADDRESS" PUBLIC_URL_CA="$PETSTORE_LB_CERT"
  exec node dist/src/server.js
}

# Sets HAProxy's servers through the runtime API: each argument a command.
balancer() { node dist/scripts/haproxy-command.js "$@"; }

# Runs instance $1 in HAProxy's server instance$1 on port $2 (metrics: 9464 + $1), and keeps it
# running: started again, in the same slot, whenever it exits after having been ready (a crash);
# one that fails to start is left down. On SIGUSR1 (roll) it starts a replacement in the other slot,
# spare$1 on port $3 (metrics: 9468 + $1), and the two slots take turns at each roll.
supervise() {
  local n=$1 slot="instance$1" port=$2 metrics=$((9464 + $1)) pid status roll_asked=0
  local other_slot="spare$1" other_port=$3 other_metrics=$((9468 + $1))
  # This supervisor's stderr is timestamped on its way out (below), bash's own job lines included.
  say() { echo "run-local: $*" >&2; }
  echo "$BASHPID" >"$run_dir/supervisor$n.pid"
  trap 'roll_asked=1' USR1
  while :; do
    run_instance "$n" "$port" "$metrics" &
    pid=$!
    echo "$pid" >"$run_dir/instance$n.pid"
    echo "$slot" >"$run_dir/instance$n.slot"
    until_ready "$port" "$pid" || {
      status=0
      wait "$pid" || status=$?
      say "instance$n (pid $pid) failed to start (exit $status); it stays down"
      return 1
    }
    while :; do
      if [ "$roll_asked" = 0 ]; then
        status=0
        wait "$pid" || status=$?
      fi
      [ "$roll_asked" = 1 ] || break
      roll_asked=0
      alive "$pid" || break
      local next
      run_instance "$n" "$other_port" "$other_metrics" &
      next=$!
      echo "$next" >"$run_dir/instance$n.next.pid"
      if ! until_ready "$other_port" "$next" ||
        ! balancer "set server instances/$other_slot addr 127.0.0.1 port $other_port" \
          "set server instances/$other_slot state ready" ||
        ! reaches_state "$other_slot" UP 60; then
        kill -TERM "$next" 2>/dev/null || true
        wait "$next" 2>/dev/null || true
        balancer "set server instances/$other_slot state maint" || true
        rm -f "$run_dir/instance$n.next.pid"
        say "instance$n: its replacement (pid $next) did not come into rotation; the old one (pid $pid) serves on"
        echo "the replacement did not come into rotation" >"$run_dir/instance$n.rolled"
        continue
      fi
      say "instance$n: replacement (pid $next, $other_slot) in rotation; draining pid $pid ($slot)"
      # No new request for the old one; it finishes those it has (SIGTERM: SHUTDOWN_DELAY_MS,
      # then in-flight requests) and exits.
      balancer "set server instances/$slot state drain" || true
      kill -TERM "$pid" 2>/dev/null || true
      local old=$pid old_slot=$slot old_status=0 swap
      echo "$old" >"$run_dir/instance$n.old.pid"
      pid=$next
      swap=$slot slot=$other_slot other_slot=$swap
      swap=$port port=$other_port other_port=$swap
      swap=$metrics metrics=$other_metrics other_metrics=$swap
      echo "$pid" >"$run_dir/instance$n.pid"
      echo "$slot" >"$run_dir/instance$n.slot"
      rm -f "$run_dir/instance$n.next.pid"
      # The roll goes on to the next instance while this one finishes: its replacement serves.
      echo replaced >"$run_dir/instance$n.rolled"
      # A roll asked meanwhile (SIGUSR1) interrupts the wait; it is served once the old one is gone.
      while alive "$old"; do
        old_status=0
        wait "$old" || old_status=$?
      done
      balancer "set server instances/$old_slot state maint" || true
      rm -f "$run_dir/instance$n.old.pid"
      say "instance$n: pid $old ($old_slot) stopped (exit $old_status)"
    done
    say "instance$n (pid $pid) exited ($status); starting it again"
  done
}

for i in "${!ports[@]}"; do
  n=$((i + 1))
  export "PETSTORE_INSTANCE_$n=127.0.0.1:${ports[$i]}"
  # Its stderr (its lines, bash's "Killed" for an instance, an instance's own) is timestamped.
  supervise "$n" "${ports[$i]}" "${surge_ports[$i]}" 2> >(stamped >&2) &
  supervisors+=($!)
  # One at a time: on an empty database the first creates the development key and prints it.
  until [ -f "$run_dir/instance$n.pid" ] && curl -sf "http://127.0.0.1:${ports[$i]}/readyz" >/dev/null; do
    alive "${supervisors[-1]}" || exit 1
    sleep 0.2
  done
done
# HAProxy's lines (its log and its warnings: a server UP or DOWN) timestamped like the script's.
"$(command -v haproxy || echo /usr/sbin/haproxy)" -db -f deploy/haproxy.cfg > >(stamped) 2>&1 &
haproxy_pid=$!
for i in "${!ports[@]}"; do
  until [ "$(server_state "instance$((i + 1))")" = UP ]; do
    alive "$haproxy_pid" || exit 1
    sleep 0.2
  done
done
say "balancer: https://$PETSTORE_LB_ADDRESS/v2 (certificate: $PETSTORE_LB_CERT, stats:" \
  "http://$PETSTORE_LB_STATS/stats, metrics: http://$PETSTORE_LB_STATS/metrics, runtime API: $PETSTORE_LB_ADMIN_SOCKET)"
say "  curl --cacert $PETSTORE_LB_CERT -H \"Authorization: Bearer \$KEY\" https://$PETSTORE_LB_ADDRESS/v2/pets"
say "  roll the instances: deploy/run-local.sh roll"
# HAProxy's exit ends the stack; an instance's is the business of its supervisor.
wait "$haproxy_pid"
