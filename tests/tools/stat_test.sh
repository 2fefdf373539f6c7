#!/usr/bin/env bash
# conduit-stat on the real path.
#
#   stat_test.sh <conduit-stat> <conduit-rpc-bench> host <conduit-run> <libconduit-preload.so>
#   stat_test.sh <conduit-stat> <conduit-rpc-bench> rdma          (in the Soft-RoCE guest)
#
# host: bad flags exit 2, a wrong pid / URL exit 1 with the reason; an rpc server's shm and
#   tcp connections through its status service (credits, wake-ups, bytes); preloaded
#   redis-server and redis-cli (shm) through their status files: the fast channel's record,
#   and a plain client's tcp row with its fallback reason.
# rdma: an rpc server on rdma:// with a live client: the connection's phase, QP state (RTS),
#   QP number, device and the port's hw_counters (rxe's sent_pkts, retry_exceeded_err, ...).
# Every wait is bounded.  Traffic stays on 127.0.0.1 (host) or the guest's own address.
set -uo pipefail
stat=$1 bench=$2 mode=$3
work=$(mktemp -d /tmp/conduit-stat-test-XXXXXX)
bg=()
cleanup() {
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
export TMPDIR=$work  # the preload's status files of this run only
unset XDG_RUNTIME_DIR
# expect <rc> <stderr pattern> -- args...
expect() {
  local want=$1 pattern=$2
  shift 3
  "$stat" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [[ $rc == "$want" ]] || fail "conduit-stat $* exited $rc, not $want: $(cat "$work/err")"
  grep -q -- "$pattern" "$work/err" || fail "conduit-stat $*: no '$pattern' in: $(cat "$work/err")"
  echo "conduit-stat $*: exit $rc, $(head -1 "$work/err")"
}
# JSON rows of `conduit-stat ARGS --json` matching a python condition on r, within 20 s.
wait_rows() {
  local cond=$1
  shift
  for _ in $(seq 200); do
    "$stat" "$@" --json >"$work/json" 2>"$work/err"
    if python3 -c "import json, sys
rows = json.load(open(sys.argv[1]))
sys.exit(0 if any($cond for r in rows) else 1)" "$work/json" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "--- last output:"
  cat "$work/json" "$work/err"
  return 1
}
start_server() {  # start_server URL...: prints the first listening URL
  local args=()
  for u in "$@"; do args+=(-l "$u"); done
  "$bench" server "${args[@]}" --seconds 120 >"$work/server.log" 2>&1 &
  bg+=($!)
  for _ in $(seq 600); do
    [[ $(grep -c '^listening' "$work/server.log") == "$#" ]] && break
    sleep 0.05
  done
  grep -m1 '^listening' "$work/server.log" | cut -d' ' -f2
}

if [[ $mode == rdma ]]; then
  addr=${CONDUIT_PRELOAD_TEST_ADDR:-192.0.2.1}
  port=$(python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$addr")
  url=$(start_server "rdma://$addr:$port")
  [[ -n $url ]] || fail "the rpc server did not start: $(cat "$work/server.log")"
  "$bench" client --url "rdma://$addr:$port" -D 60 -w 0.1 >/dev/null 2>&1 &
  bg+=($!)
  # Over rdma the status call itself is a second rdma connection; the bench client's is the
  # one with traffic.
  wait_rows 'r["transport"] == "rdma" and r["state"] == "open" and r.get("qp_state") == "RTS" and r.get("qpn", 0) > 0 and r.get("device", "").startswith("rxe") and r["bytes_in"] > 1000 and r.get("ctr.sent_pkts", 0) > 0 and "ctr.retry_exceeded_err" in r and "ctr.rcvd_rnr_err" in r and r["credits"] >= 0' \
    --url "rdma://$addr:$port" --timeout-ms 20000 || fail "no open rdma connection with QP state RTS and the port's counters"
  "$stat" --url "rdma://$addr:$port" --timeout-ms 20000 -d || fail "the table"
  "$stat" --url "rdma://$addr:$port" --timeout-ms 20000 -d | grep -qE 'rdma +open .* RTS/[0-9]+' || fail "the table shows no 'rdma open ... RTS/qpn'"
  echo "PASS: conduit-stat over rdma (QP state and device counters)"
  exit 0
fi

run=$4 lib=$5
# 1. Usage and wrong sources.
expect 2 "unknown option '--bogus'" -- --bogus
expect 2 "'abc' is not a number" -- --pid abc
expect 2 "--url needs URL" -- --url
expect 2 "--json takes no value" -- --json=1
expect 1 "no process 4194000" -- --pid 4194000
expect 1 "publishes no conduit status" -- --pid $$
expect 1 "no transport for nope://x" -- --url nope://x
closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
expect 1 "is a conduit::rpc server listening there" -- --url "tcp://127.0.0.1:$closed" --timeout-ms 2000
"$stat" --help >"$work/help" || fail "--help exited non-zero"
for o in pid url timeout-ms listening details json help; do grep -q -- "--$o" "$work/help" || fail "--help lacks --$o"; done

# 2. An rpc server: a live shm client and the status call's own tcp connection.
shm=stat-test-$$
tcp=$(start_server tcp://127.0.0.1:0 "shm://$shm")
[[ $tcp == tcp://* ]] || fail "the rpc server did not start: $(cat "$work/server.log")"
"$bench" client --url "shm://$shm" -D 60 -w 0.1 >/dev/null 2>&1 &
bg+=($!)
wait_rows 'r["transport"] == "shm" and r["state"] == "connected" and r["bytes_in"] > 1000 and r["credits"] > 0 and r["wakeups"] >= 0 and r["pinned"] > 0' \
  --url "$tcp" || fail "no live shm connection with credits in the server's status"
wait_rows 'r["transport"] == "tcp" and r["credits"] == -1 and r["role"] == "server"' --url "$tcp" ||
  fail "no tcp connection (the status call's own) in the server's status"
"$stat" --url "$tcp" -d | tee "$work/table"
grep -qE '^tcp://.* server +shm +connected ' "$work/table" || fail "the table shows no 'server shm connected' row"
echo "rpc server: shm and tcp connections through the status service"

# 3. Preloaded programs (plain build only: tests/CMakeLists passes "-" otherwise).
if [[ $run != - ]]; then
  for p in redis-server redis-cli; do command -v $p >/dev/null || fail "$p not installed (scripts/install-deps.sh)"; done
  export CONDUIT_PRELOAD_LIB=$lib
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$run" --mode shm --log warn -- redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$work" --logfile "$work/redis.log" &
  server=$!
  bg+=($server)
  for _ in $(seq 100); do [[ $(timeout 5 redis-cli -p "$port" ping 2>/dev/null) == PONG ]] && break; sleep 0.1; done
  # One preloaded and one plain subscriber: both stay connected.
  timeout 60 "$run" --mode shm --log warn -- redis-cli -p "$port" subscribe stat-test >/dev/null &
  bg+=($!)
  timeout 60 redis-cli -p "$port" subscribe stat-test >/dev/null &
  bg+=($!)
  wait_rows 'r["pid"] == '"$server"' and r["role"] == "server" and r["transport"] == "shm" and r["state"] == "connected" and r["bytes_in"] > 0 and r["credits"] > 0' \
    --pid "$server" || fail "conduit-stat --pid: no fast shm channel of redis-server"
  wait_rows 'r["transport"] == "tcp" and "did not announce" in r.get("fallback", "")' --pid "$server" ||
    fail "conduit-stat --pid: no tcp row with the plain client's fallback reason"
  wait_rows 'r["role"] == "client" and r["transport"] == "shm"' || fail "conduit-stat (all): no preloaded redis-cli"
  wait_rows 'r["role"] == "listener"' --pid "$server" -l || fail "conduit-stat -l: no listener"
  "$stat" --pid "$server" -l
  echo "preload: redis-server's fast channel and a plain client's fallback through the status files"
fi
echo "PASS: conduit-stat ($mode)"
