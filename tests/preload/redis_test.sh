#!/usr/bin/env bash
# Debian's unmodified redis-server, redis-cli and redis-benchmark under conduit-run.
#
#   redis_test.sh <conduit-run> <libconduit-preload.so> <mode: shm|rdma>
#
#   1. redis-server starts under conduit-run; a redis-cli WITHOUT the preload reaches it
#      (plain TCP, the server lists the reason).
#   2. A 1 MiB random value goes in and comes back byte for byte through preloaded clients
#      (fast), and the same bytes come back to the plain client over TCP.
#   3. conduit-run --list shows the live connections: the preloaded client's as fast over
#      <mode> on both ends, the plain client's as tcp with its reason.
#   4. redis-benchmark (SET and GET, several connections, pipelined) under conduit-run
#      completes, and every one of its connections went fast.
#   5. SHUTDOWN through a preloaded client; the server exits 0 and leaves no status file.
# Everything is bounded by timeouts.  Traffic stays on 127.0.0.1, or for rdma (in the
# Soft-RoCE guest) on $CONDUIT_PRELOAD_TEST_ADDR, by default the guest's 192.0.2.1.
set -uo pipefail
run=$1
lib=$2
mode=${3:-shm}
addr=127.0.0.1
requests=20000
if [[ $mode == rdma ]]; then
  addr=${CONDUIT_PRELOAD_TEST_ADDR:-192.0.2.1}
  export CONDUIT_PRELOAD_RDMA=${CONDUIT_PRELOAD_RDMA:-connect_timeout_ms=60000}
  export CONDUIT_PRELOAD_TIMEOUT_MS=${CONDUIT_PRELOAD_TIMEOUT_MS:-30000}  # rdma_cm under TCG is slow
  requests=4000
fi
for p in redis-server redis-cli redis-benchmark python3; do
  command -v "$p" >/dev/null || { echo "FAIL: $p not installed (scripts/install-deps.sh installs it)"; exit 1; }
done
work=$(mktemp -d /tmp/conduit-redis-preload-XXXXXX)
server_pid=
bg=()
cleanup() {
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null; done
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export TMPDIR=$work  # the status files of this run only
unset XDG_RUNTIME_DIR
export CONDUIT_PRELOAD_LIB=$lib
fail() {
  echo "FAIL: $*"
  echo "--- redis-server log:"
  tail -20 "$work/redis.log" 2>/dev/null
  echo "--- conduit-run --list:"
  "$run" --list
  exit 1
}
fast=("$run" --mode "$mode" --log warn --)  # a program under the preload

port=$(python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$addr")
# --protected-mode no: in the guest the clients come from the rxe address 192.0.2.1, not from
# loopback, and a password-less redis answers those with -DENIED (with or without the preload).
"${fast[@]}" redis-server --port "$port" --bind "$addr" --protected-mode no --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" &
server_pid=$!

# 1. A plain client (no preload) reaches the preloaded server.
up=0
for _ in $(seq 100); do
  if [[ $(timeout 5 redis-cli -h "$addr" -p "$port" ping 2>/dev/null) == PONG ]]; then up=1; break; fi
  sleep 0.1
done
((up)) || fail "redis-server under conduit-run did not answer a plain redis-cli within 10 s"
echo "plain redis-cli -> preloaded redis-server: PONG"

# 2. Byte for byte, through the fast path and through TCP.
head -c 1048576 /dev/urandom >"$work/value"
[[ $(timeout 20 "${fast[@]}" redis-cli -h "$addr" -p "$port" -x set blob <"$work/value") == OK ]] || fail "SET of 1 MiB through the preload"
timeout 20 "${fast[@]}" redis-cli -h "$addr" -p "$port" --raw get blob >"$work/got.fast" || fail "GET through the preload"
timeout 20 redis-cli -h "$addr" -p "$port" --raw get blob >"$work/got.tcp" || fail "GET over plain TCP"
for f in fast tcp; do
  # --raw prints the value and a newline.
  [[ $(stat -c %s "$work/got.$f") == 1048577 ]] || fail "GET ($f) returned $(stat -c %s "$work/got.$f") bytes, not 1048576+1"
  head -c 1048576 "$work/got.$f" | cmp -s - "$work/value" || fail "GET ($f): the value differs from what was SET"
done
echo "1 MiB random value: SET and GET through the preload, GET over TCP: identical"

# 3. The listing, while one preloaded and one plain client are connected (10 s of pings:
# over rdma in a loaded TCG guest the preloaded client's rdma_cm setup alone can take
# seconds, and a 3 s window let the plain client finish before the fast one was listed).
timeout 40 "${fast[@]}" redis-cli -h "$addr" -p "$port" -r 200 -i 0.05 ping >/dev/null &
bg+=($!)
timeout 40 redis-cli -h "$addr" -p "$port" -r 200 -i 0.05 ping >/dev/null &
bg+=($!)
seen=0
for _ in $(seq 100); do
  "$run" --list >"$work/list"
  # The server's ends: one fast (the preloaded client), one tcp with the reason.
  if grep -qE "^[0-9]+ +redis-server +[0-9]+ +server +fast +$mode " "$work/list" &&
    grep -qE "^[0-9]+ +redis-cli +[0-9]+ +client +fast +$mode " "$work/list" &&
    grep -qE "^[0-9]+ +redis-server +[0-9]+ +server +tcp .*did not announce" "$work/list"; then
    seen=1
    break
  fi
  sleep 0.1
done
cat "$work/list"
((seen)) || fail "conduit-run --list did not show a fast $mode connection on both ends and the plain client's tcp reason"
"$run" --list --json | python3 -c 'import json, sys; json.load(sys.stdin)' || fail "conduit-run --list --json is not JSON"
for p in "${bg[@]}"; do wait "$p" || fail "a redis-cli pinging for 10 s failed"; done
bg=()
echo "conduit-run --list: fast $mode on both ends, the plain client on tcp with its reason"

# 4. redis-benchmark, pipelined, several connections.
before=$("$run" --list --json | python3 -c 'import json, sys; print(sum(p["fast"] for p in json.load(sys.stdin) if p["name"] == "redis-server"))')
timeout 60 "${fast[@]}" redis-benchmark -h "$addr" -p "$port" -n "$requests" -c 8 -P 4 -t set,get -d 100 -q >"$work/bench" 2>&1 ||
  fail "redis-benchmark under conduit-run: $(cat "$work/bench")"
tr '\r' '\n' <"$work/bench" | grep -E '^(SET|GET):' || fail "redis-benchmark printed no SET/GET figures: $(cat "$work/bench")"
[[ $(tr '\r' '\n' <"$work/bench" | grep -cE '^(SET|GET): .*requests per second') == 2 ]] || fail "redis-benchmark did not finish both tests"
after=0
for _ in $(seq 50); do  # the status file is rewritten within ~50 ms of a change
  after=$("$run" --list --json | python3 -c 'import json, sys; print(sum(p["fast"] for p in json.load(sys.stdin) if p["name"] == "redis-server"))')
  ((after - before >= 8)) && break
  sleep 0.1
done
((after - before >= 8)) || fail "redis-server decided only $((after - before)) fast connections for redis-benchmark's 8+"
echo "redis-benchmark -c 8 -P 4 under conduit-run: done, $((after - before)) connections fast"

# 5. Shutdown.
timeout 10 "${fast[@]}" redis-cli -h "$addr" -p "$port" shutdown nosave >/dev/null 2>&1
rc=0
for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
wait "$server_pid"
rc=$?
server_pid=
((rc == 0)) || fail "redis-server exited $rc"
left=$(find "$work" -name '*.status' | wc -l)
((left == 0)) || fail "$left status file(s) left behind"
echo "PASS: redis over conduit-run ($mode)"
