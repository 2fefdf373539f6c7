#!/usr/bin/env bash
# Drives conduit-kv with Debian's real redis-cli and redis-benchmark (package redis-tools),
# and conduit-kv-bench over tcp and shm.  Exit 77 (ctest: skipped) when redis-tools is
# missing.  Everything runs on 127.0.0.1 with bounded request counts and timeouts.
#
#   redis_tools_test.sh <conduit-kv> <conduit-kv-bench>
set -uo pipefail
KV=$1
BENCH=$2
for tool in redis-cli redis-benchmark; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool not found (Debian package redis-tools; scripts/install-deps.sh installs it)"
    exit 77
  fi
done

work=$(mktemp -d /tmp/conduit-kv-tools-XXXXXX)
shm="kvtools-$$"
server_pid=""
cleanup() {
  [[ -n $server_pid ]] && kill -9 "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

fails=0
passes=0
check() {  # check <name> <expected> <actual>
  if [[ "$2" == "$3" ]]; then
    passes=$((passes + 1))
  else
    fails=$((fails + 1))
    echo "FAIL: $1"
    echo "  expected: $(printf '%q' "$2")"
    echo "  actual:   $(printf '%q' "$3")"
  fi
}
contains() {  # contains <name> <needle> <haystack>
  if [[ "$3" == *"$2"* ]]; then
    passes=$((passes + 1))
  else
    fails=$((fails + 1))
    echo "FAIL: $1: $(printf '%q' "$2") not in output:"
    echo "$3" | head -20
  fi
}

"$KV" --port 0 --shm-name "$shm" --loglevel warning 2>"$work/server.log" &
server_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*connections on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.log")
  [[ -n $port ]] && break
  sleep 0.1
done
if [[ -z $port ]]; then
  echo "FAIL: conduit-kv did not start"; cat "$work/server.log"; exit 1
fi
echo "conduit-kv on port $port (shm://$shm)"
cli() { timeout 10 redis-cli -p "$port" "$@"; }

# --- redis-cli ----------------------------------------------------------------------------------
check "ping" "PONG" "$(cli ping)"
check "set" "OK" "$(cli set greeting 'hello world')"
check "get" "hello world" "$(cli get greeting)"
check "incr" "5" "$(cli incrby n 5)"
check "rpush" "3" "$(cli rpush l a b c)"
check "lrange" "$(printf 'a\nb\nc')" "$(cli lrange l 0 -1)"
check "hset/hgetall" "$(printf 'f\nv')" "$(cli hset h f v >/dev/null; cli hgetall h)"
check "wrongtype" "WRONGTYPE Operation against a key holding the wrong kind of value" "$(cli lpush greeting x)"
check "arity" "ERR wrong number of arguments for 'get' command" "$(cli get)"
check "unknown" "ERR unknown command 'nosuch', with args beginning with: 'x' " "$(cli nosuch x)"
check "db select (-n)" "OK" "$(cli -n 3 set only3 x)"
check "db isolation" "" "$(cli get only3)"
check "dbsize db3" "1" "$(cli -n 3 dbsize)"
check "ttl" "100" "$(cli set t v ex 100 >/dev/null; cli ttl t)"
contains "resp3 hello" "proto 3" "$(cli -3 hello 3)"
check "resp3 null (raw output prints nothing)" "" "$(cli -3 get nope)"
check "resp3 map reply" "f v" "$(cli -3 hgetall h)"
check "--scan" "$(printf 'k1\nk2')" "$(cli mset k1 a k2 b >/dev/null; cli --scan --pattern 'k?' | sort)"
contains "info transports" "transport_tcp:" "$(cli info transports)"
contains "info persistence" "aof_enabled:0" "$(cli info persistence)"
contains "config get" "maxmemory" "$(cli config get 'max*')"
contains "client list" "transport=tcp" "$(cli client list)"
check "command count > 80" "yes" "$([[ $(cli command count) -gt 80 ]] && echo yes || echo no)"
# Pipe mode (redis-cli --pipe sends raw RESP and checks the replies).
printf 'SET p1 a\r\nSET p2 b\r\nINCR pc\r\n' > "$work/pipe.txt"
contains "--pipe" "errors: 0, replies: 3" "$(timeout 20 redis-cli -p "$port" --pipe < "$work/pipe.txt" 2>&1)"

# Interactive start-up (redis-cli asks COMMAND DOCS for its hints) under a pseudo-terminal.
if command -v script >/dev/null; then
  # TERM=dumb: linenoise reads plain lines instead of probing the terminal.
  out=$(printf 'set i 1\nget i\nquit\n' | TERM=dumb timeout 20 script -qec "redis-cli -p $port" /dev/null 2>&1)
  contains "interactive redis-cli works" '"1"' "$out"
  if [[ "$out" == *"ERR"* ]]; then
    fails=$((fails + 1)); echo "FAIL: interactive redis-cli printed an error:"; echo "$out"
  else
    passes=$((passes + 1))
  fi
fi

# --- redis-benchmark: the whole default test set, plain and pipelined ----------------------------
expected_tests=(PING_INLINE PING_MBULK SET GET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN
  "LPUSH (needed to benchmark LRANGE)" "LRANGE_100 (first 100 elements)" "LRANGE_300 (first 300 elements)"
  "LRANGE_500 (first 500 elements)" "LRANGE_600 (first 600 elements)" "MSET (10 keys)")
for opts in "-c 20" "-c 20 -P 16" "-c 4 -d 1024"; do
  out=$(timeout 300 redis-benchmark -p "$port" -q -n 2000 $opts 2>&1 | tr '\r' '\n')
  for t in "${expected_tests[@]}"; do
    contains "redis-benchmark $opts: $t" "$t: " "$(echo "$out" | grep -F "requests per second")"
  done
  if echo "$out" | grep -qiE "error|ERR "; then
    fails=$((fails + 1)); echo "FAIL: redis-benchmark $opts reported errors:"; echo "$out" | grep -iE "error|ERR " | head
  fi
done
# The data redis-benchmark left behind is well formed.
check "benchmark list length" "yes" "$([[ $(cli llen mylist) -gt 0 ]] && echo yes || echo no)"

# --- conduit-kv-bench over tcp and shm -------------------------------------------------------------
out=$(timeout 120 "$BENCH" -p "$port" -t set,get,incr,lpush,lrange_100,mset -n 3000 -c 8 -q 2>&1)
for t in SET GET INCR LPUSH "LRANGE_100 (first 100 elements)" "MSET (10 keys)"; do
  contains "conduit-kv-bench tcp: $t" "$t: " "$out"
done
out=$(timeout 120 "$BENCH" --transport shm --shm-name "$shm" -t set,get -n 3000 -c 4 -P 8 -q 2>&1)
contains "conduit-kv-bench shm: SET" "SET: " "$out"
contains "conduit-kv-bench shm: GET" "GET: " "$out"
out=$(timeout 120 "$BENCH" -p "$port" -t get -n 2000 -c 2 --csv 2>&1)
contains "conduit-kv-bench --csv" '"GET","' "$out"
out=$(timeout 120 "$BENCH" -p "$port" -t ping -n 2000 -c 2 --threads 2 2>&1)
contains "conduit-kv-bench full output" "throughput summary:" "$out"
contains "conduit-kv-bench percentiles" "latency summary (msec):" "$out"
contains "info shows shm traffic" "transport_shm:" "$(cli info transports)"

# --- shutdown ----------------------------------------------------------------------------------------
cli shutdown >/dev/null 2>&1
for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server_pid" 2>/dev/null; then
  fails=$((fails + 1)); echo "FAIL: conduit-kv did not exit after SHUTDOWN"
else
  wait "$server_pid"; rc=$?; server_pid=""
  check "exit status after SHUTDOWN" "0" "$rc"
fi

echo "redis tools: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
