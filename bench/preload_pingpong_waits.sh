#!/usr/bin/env bash
# conduit-plain-pingpong (blocking-socket ping-pong, 1000 round trips of 64 B) through
# plain TCP, `conduit-run --mode rdma` with the preload's wait options varied, and through rsocket's
# preload, two runs each; prints each run's "pingpong: N SIZE p50 avg min max" (µs).  Runs
# inside the Soft-RoCE guest on its rxe address:
#   testbed/run -- bash bench/preload_pingpong_waits.sh [BUILD_DIR]
# Bounded: every program is killed after 60 s.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$REPO/build}
RUN=$BUILD/tools/run/conduit-run
PINGPONG=$BUILD/bench/plain_pingpong/conduit-plain-pingpong
RSOCKET=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
ADDR=${CONDUIT_PRELOAD_TEST_ADDR:-192.0.2.1}
export CONDUIT_PRELOAD_RDMA=connect_timeout_ms=60000 CONDUIT_PRELOAD_TIMEOUT_MS=30000
TMPDIR=$(mktemp -d)
export TMPDIR
unset XDG_RUNTIME_DIR
p=20100
for v in "tcp" "rdma" "rdma --poll-us 0" "rdma --spin-us 1000" "rdma --poll-us 2000" "rsocket"; do
  for _ in 1 2; do
    p=$((p + 1))
    if [[ $v == tcp ]]; then W=(env); elif [[ $v == rsocket ]]; then W=(env LD_PRELOAD=$RSOCKET); else read -ra W <<<"$RUN --mode $v --log warn --"; fi
    timeout 60 taskset -c 0 "${W[@]}" "$PINGPONG" serve "$ADDR" "$p" >/dev/null 2>&1 &
    sleep 3  # the server listens before the client connects
    echo "[$v] $(timeout 60 taskset -c 1 "${W[@]}" "$PINGPONG" ping "$ADDR" "$p" 1000 64 2>&1 | tail -1)"
    wait
  done
done
rm -rf "$TMPDIR"
