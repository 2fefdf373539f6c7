#!/usr/bin/env bash
# conduit-plain-pingpong (the unmodified program bench/preload.sh and
# bench/preload_pingpong_waits.sh time against rsocket's preload) runs to completion as it
# is and under conduit-run, and under conduit-run both of its ends go fast: the benchmark's
# program cannot rot, nor silently stay on TCP.
#
#   pingpong_test.sh <conduit-run> <conduit-plain-pingpong> [shm|rdma]
# Bounded: each program is killed after 60 s.
set -uo pipefail
run=$1
pp=$2
mode=${3:-shm}
addr=127.0.0.1
if [[ $mode == rdma ]]; then
  addr=${CONDUIT_PRELOAD_TEST_ADDR:-192.0.2.1}
  export CONDUIT_PRELOAD_RDMA=${CONDUIT_PRELOAD_RDMA:-connect_timeout_ms=60000}
  export CONDUIT_PRELOAD_TIMEOUT_MS=${CONDUIT_PRELOAD_TIMEOUT_MS:-30000}
fi
work=$(mktemp -d /tmp/conduit-pingpong-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
export TMPDIR=$work
unset XDG_RUNTIME_DIR
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Waits until the server's port is listening (a client that connects while the preloaded
# server starts may stay TCP: docs/PRELOAD.md, "Not supported").
listening() { for _ in $(seq 1 200); do ss -Hltn "sport = :$1" | grep -q . && return 0; sleep 0.05; done; return 1; }

# One round: server and client, both wrapped in "$@" (nothing, or conduit-run).
round() {
  local name=$1 p
  shift
  p=$(port)
  timeout 60 "$@" "$pp" serve "$addr" "$p" >"$work/$name-srv.log" 2>&1 &
  local srv=$!
  listening "$p" || fail "$name: server did not listen on $p"
  sleep 0.2  # the preloaded server's rendezvous is up once it listens; leave the accept loop time to start
  timeout 60 "$@" "$pp" ping "$addr" "$p" 500 64 >"$work/$name-cli.out" 2>"$work/$name-cli.log" || fail "$name: client exit $?"
  grep -Eq '^pingpong: 500 64 [0-9.]+ [0-9.]+ [0-9.]+ [0-9.]+$' "$work/$name-cli.out" || fail "$name: no result line: $(cat "$work/$name-cli.out")"
  wait "$srv" || fail "$name: server exit $?"
}
round plain
round preload "$run" --mode "$mode" --log info --
grep -q ": $mode (" "$work/preload-srv.log" || fail "the server's connection did not go $mode"
grep -q ": $mode (" "$work/preload-cli.log" || fail "the client's connection did not go $mode"
echo "PASS: plain and $mode: $(cat "$work/plain-cli.out") / $(cat "$work/preload-cli.out")"
