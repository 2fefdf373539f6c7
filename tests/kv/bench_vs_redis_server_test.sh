#!/usr/bin/env bash
# conduit-kv-bench against Debian's real redis-server (package redis-server): the client
# side of conduit-kv speaks correct RESP to the reference implementation.  Exit 77 (ctest:
# skipped) when redis-server is missing.  127.0.0.1 only, bounded request counts.
#
#   bench_vs_redis_server_test.sh <conduit-kv-bench>
set -uo pipefail
BENCH=$1
if ! command -v redis-server >/dev/null; then
  echo "SKIP: redis-server not found (Debian package redis-server; scripts/install-deps.sh installs it)"
  exit 77
fi
work=$(mktemp -d /tmp/conduit-kv-redis-XXXXXX)
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

port=""
for try in 1 2 3 4 5; do
  p=$((20000 + (RANDOM % 20000)))
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
    --logfile "$work/redis.log" --protected-mode yes &
  pid=$!
  for _ in $(seq 50); do
    if timeout 2 "$BENCH" -p "$p" -t ping_mbulk -n 1 -c 1 -q >/dev/null 2>&1; then port=$p; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $port ]] && break
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""
done
if [[ -z $port ]]; then echo "FAIL: redis-server did not start"; cat "$work/redis.log"; exit 1; fi
echo "redis-server $(redis-server --version | awk '{print $3}') on port $port"

fails=0
passes=0
expect() {
  if [[ "$3" == *"$2"* ]]; then passes=$((passes + 1)); else fails=$((fails + 1)); echo "FAIL: $1"; echo "$3" | head -20; fi
}
out=$(timeout 300 "$BENCH" -p "$port" -n 3000 -c 10 -q 2>&1)
for t in PING_INLINE PING_MBULK SET GET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN \
         "LRANGE_100 (first 100 elements)" "LRANGE_600 (first 600 elements)" "MSET (10 keys)" XADD; do
  expect "default set vs redis-server: $t" "$t: " "$out"
done
if echo "$out" | grep -qi 'error'; then fails=$((fails + 1)); echo "FAIL: error replies:"; echo "$out" | grep -i error | head; else passes=$((passes + 1)); fi
out=$(timeout 120 "$BENCH" -p "$port" -t set,get -n 5000 -c 20 -P 16 -d 1024 -r 1000 2>&1)
expect "pipelined full output" "throughput summary:" "$out"
expect "percentile table" "Latency by percentile distribution:" "$out"
expect "server config shown" 'host configuration "appendonly": no' "$out"
out=$(timeout 120 "$BENCH" -p "$port" -3 -t get -n 1000 -c 2 -q 2>&1)
expect "RESP3 sessions" "GET: " "$out"
out=$(timeout 120 "$BENCH" -p "$port" -n 1000 -c 2 -q SET foo bar 2>&1)
expect "custom command" "SET foo bar: " "$out"
echo "conduit-kv-bench vs redis-server: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
