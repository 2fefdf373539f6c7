#!/usr/bin/env bash
# Conduit's main demo, as the README's demo command runs it:
#   1. install dependencies (scripts/install-deps.sh) and build (RelWithDebInfo, build/)
#   2. on the host: start conduit-kv on TCP and shared memory, talk to it with Debian's
#      redis-cli, then benchmark it with redis-benchmark next to Debian's redis-server and
#      with conduit-kv-bench over shm://
#   3. in the Soft-RoCE guest (testbed/run): conduit-kv served over rdma:// and tcp:// on the
#      guest's rxe0 address, conduit-kv-bench over both, then conduit-perf next to perftest
#      (bench/perf_vs_perftest.sh, a short subset)
#   (also conduit-bench ping-pong and streaming over tcp:// and shm:// on the host)
#   RPC: one conduit-rpc-bench server on tcp:// and shm://, called with conduit-rpc over
#   both and read with `conduit-rpc status`, a short echo benchmark; in the guest the same
#   over rdma:// (changing the URL is the only difference)
# Everything stays on 127.0.0.1 or inside the guest; every run is bounded by count and time.
# Takes about 3 minutes after the build.  Numbers on a shared 2-core machine are noisy:
# docs/BENCHMARKS.md has the measured tables and how to reproduce them.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${CONDUIT_JOBS:-$(nproc)}

bash scripts/install-deps.sh
echo "== build (RelWithDebInfo) =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs" --target conduit-kv conduit-kv-bench conduit-perf conduit-bench conduit-rpc conduit-rpc-bench

kv=build/tools/kv/conduit-kv
kvbench=build/tools/kv/conduit-kv-bench
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {  # wait_port PORT: until redis-cli gets PONG (at most 10 s)
  for _ in $(seq 100); do
    if [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]]; then return 0; fi
    sleep 0.1
  done
  echo "demo: nothing answers on port $1" >&2
  return 1
}

echo
echo "== conduit-kv on the host: tcp://127.0.0.1 and shm:// =="
kv_port=$(free_port)
shm_name=conduit-demo-$$
"$kv" --port "$kv_port" --shm-name "$shm_name" --dir "$work" >"$work/kv.log" 2>&1 &
pids+=($!)
wait_port "$kv_port"
set -x
redis-cli -p "$kv_port" set greeting "hello over conduit"
redis-cli -p "$kv_port" get greeting
redis-cli -p "$kv_port" rpush demo:list a b c
redis-cli -p "$kv_port" lrange demo:list 0 -1
redis-cli -p "$kv_port" info server | grep -E '^(redis_version|conduit)' || true
set +x

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  >"$work/redis.log" 2>&1 &
pids+=($!)
wait_port "$redis_port"

echo
echo "== redis-benchmark (-c 50 -n 50000, set/get): redis-server, then conduit-kv =="
for who in "redis-server:$redis_port" "conduit-kv:$kv_port"; do
  echo "-- ${who%%:*}"
  # -q still draws a progress line with CRs; keep only the results
  timeout 60 redis-benchmark -p "${who##*:}" -c 50 -n 50000 -t set,get -q | tr '\r' '\n' |
    grep 'requests per second' | sed 's/^ *//'
done
echo
echo "== conduit-kv-bench -c 1 -n 20000 set/get: conduit-kv over tcp://, then shm:// =="
echo "-- tcp"
timeout 60 "$kvbench" -p "$kv_port" -c 1 -n 20000 -t set,get -q
echo "-- shm ($shm_name)"
timeout 60 "$kvbench" --transport shm --shm-name "$shm_name" -c 1 -n 20000 -t set,get -q

for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

echo
echo "== conduit-bench on the host: the same program over tcp:// and shm:// (loopback, 1 s per cell) =="
cb=build/tools/bench/conduit-bench
for url in tcp://127.0.0.1:0 "shm://conduit-demo-bench-$$" "shm://conduit-demo-busy-$$?busy_poll_us=100"; do
  echo "-- $url"
  timeout 60 "$cb" stream --loopback "$url" -t pingpong -s 64,16K -D 1 --no-progress |
    awk '/#bytes.*one-way/ {p = 1} p && /^ *(#|[0-9])/ {print}'
  timeout 60 "$cb" stream --loopback "$url" -t stream -s 64K,1M -D 1 --no-progress | grep -E '^ *(#bytes|[0-9])'
done

echo
echo "== RPC on the host: one echo server on tcp:// and shm://, conduit-rpc over both =="
rb=build/tools/rpc/conduit-rpc-bench
rc=build/tools/rpc/conduit-rpc
rpc_shm=conduit-demo-rpc-$$
"$rb" server -l tcp://127.0.0.1:0 -l "shm://$rpc_shm" --seconds 120 >"$work/rpc.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ $(grep -c '^listening' "$work/rpc.log" || true) == 2 ]] && break; sleep 0.05; done
rpc_tcp=$(grep '^listening tcp' "$work/rpc.log" | cut -d' ' -f2)
for url in "$rpc_tcp" "shm://$rpc_shm"; do
  echo "-- conduit-rpc call $url conduit.rpc.echo.EchoService/Echo '{\"payload\":\"aGVsbG8=\"}'"
  timeout 10 "$rc" call "$url" conduit.rpc.echo.EchoService/Echo '{"payload":"aGVsbG8="}' -H trace-id=demo
done
echo "-- conduit-rpc status $rpc_tcp"
timeout 10 "$rc" status "$rpc_tcp"
echo "-- conduit-rpc-bench client (64 B, concurrency 1 and 16, 1 s per cell) over tcp:// then shm://"
timeout 60 "$rb" client --url "$rpc_tcp" -s 64 -c 1,16 -D 1
timeout 60 "$rb" client --url "shm://$rpc_shm" -s 64 -c 1,16 -D 1 | tail -n +2
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

echo
echo "== in the Soft-RoCE guest: conduit-kv over rdma:// and tcp:// =="
testbed/run --timeout 600 -- bash -c '
  set -euo pipefail
  addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
  build/tools/kv/conduit-kv --port 6379 --bind "$addr" --rdma-port 6380 --protected-mode no \
    --dir /tmp >/tmp/kv.log 2>&1 &
  for _ in $(seq 100); do grep -q "ready to accept connections on rdma" /tmp/kv.log && break; sleep 0.1; done
  for t in rdma tcp; do
    port=6379; [[ $t == rdma ]] && port=6380
    echo "-- conduit-kv-bench --transport $t -c 4 -n 5000 -t set,get"
    timeout 60 build/tools/kv/conduit-kv-bench --transport "$t" -h "$addr" -p "$port" -c 4 -n 5000 -t set,get -q
  done
  kill %1; wait || true
  echo
  echo "== RPC in the guest: the echo server on rdma:// and tcp://, conduit-rpc over rdma:// =="
  build/tools/rpc/conduit-rpc-bench server -l "rdma://$addr:7100" -l "tcp://$addr:7101" --seconds 120 >/tmp/rpc.log 2>&1 &
  rpid=$!
  for _ in $(seq 200); do [[ $(grep -c "^listening" /tmp/rpc.log || true) == 2 ]] && break; sleep 0.1; done
  timeout 30 build/tools/rpc/conduit-rpc call "rdma://$addr:7100" conduit.rpc.echo.EchoService/Echo "{\"payload\":\"aGVsbG8=\"}"
  timeout 30 build/tools/rpc/conduit-rpc status "rdma://$addr:7100" | sed -n "/^trans/,\$p"
  for t in rdma tcp; do
    port=7101; [[ $t == rdma ]] && port=7100
    timeout 60 build/tools/rpc/conduit-rpc-bench client --url "$t://$addr:$port" -s 64 -c 1,16 -D 1
  done
  kill "$rpid"; wait || true
  echo
  echo "== conduit-perf next to perftest on rxe0 (short run; bench/perf_vs_perftest.sh for the full one) =="
  bash bench/perf_vs_perftest.sh --reps 1 --tests "write_bw send_lat" --sizes "64 65536" \
    --bw-seconds 1 --lat-iters 1000 --results /tmp/demo-results
'
echo
echo "demo: done"
