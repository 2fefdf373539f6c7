#!/usr/bin/env bash
# Every numeric flag of every tool refuses NaN, infinities, negative numbers where they make
# no sense and out-of-range values, with a message naming the flag and a non-zero exit --
# never by running forever or dying of std::bad_alloc (issue 9, item 8).
#   numeric_flags_test.sh CONDUIT_BENCH CONDUIT_KV_BENCH CONDUIT_KV CONDUIT_PERF CONDUIT_FANIN
set -uo pipefail
bench=$1 kvbench=$2 kv=$3 perf=$4 fanin=$5
fails=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# refuse FLAG_NAME_IN_MESSAGE COMMAND...: must exit non-zero within 10 s, saying which flag.
refuse() {
  local flag=$1
  shift
  timeout 10 "$@" >"$out" 2>&1
  local rc=$?
  if ((rc == 0 || rc == 124)) || ! grep -q -- "$flag" "$out"; then
    echo "FAIL (rc=$rc): $* -> $(head -c 300 "$out")"
    fails=$((fails + 1))
  fi
}

lb=(stream --loopback tcp://127.0.0.1:0)
for v in nan -nan inf -inf 1e400 0 -1 3601; do refuse --duration "$bench" "${lb[@]}" -D "$v"; done
for v in nan inf 0 -1 3601; do refuse --timeout "$bench" "${lb[@]}" --timeout "$v"; done
for v in nan inf -1 61; do refuse --warmup "$bench" "${lb[@]}" -w "$v"; done
for v in nan 0 -1 18446744073709551615 1e3 010x; do refuse --iters "$bench" "${lb[@]}" -n "$v"; done
for v in nan -1 0 1000001; do refuse --sessions "$bench" stream --server tcp://127.0.0.1:0 --sessions "$v"; done
for v in nan -1 1000001; do refuse --busy-poll-us "$bench" "${lb[@]}" --busy-poll-us "$v"; done
for v in nan -1 4096; do refuse --cpu "$bench" "${lb[@]}" --cpu "$v"; done
for v in nan -1 4096; do refuse --server-cpu "$bench" "${lb[@]}" --server-cpu "$v"; done
for v in nan 999 100000001; do refuse --max-samples "$bench" "${lb[@]}" --max-samples "$v"; done
for v in nan 0 -5 64G 2G; do refuse --sizes "$bench" "${lb[@]}" -s "$v"; done
for v in nan 0 -1K 2G; do refuse --size "$bench" memcpy -s "$v"; done
for v in nan inf 0 601; do refuse --duration "$bench" memcpy -D "$v"; done

for v in nan -1 0 65536; do refuse -p "$kvbench" -p "$v"; done
for v in nan 0 100001; do refuse -c "$kvbench" -c "$v"; done
for v in nan -1 0 1000000000001; do refuse -n "$kvbench" -n "$v"; done
for v in nan -1 0 99999999999 536870913; do refuse -d "$kvbench" -d "$v"; done
for v in nan -1 2147483648; do refuse --dbnum "$kvbench" --dbnum "$v"; done
for v in nan 0 257; do refuse --threads "$kvbench" --threads "$v"; done
for v in nan -1 2; do refuse -k "$kvbench" -k "$v"; done
for v in nan -1 9223372036854775808; do refuse -r "$kvbench" -r "$v"; done
for v in nan 0 100001; do refuse -P "$kvbench" -P "$v"; done
for v in nan -1 10; do refuse --precision "$kvbench" --precision "$v"; done
for v in nan -1 1000001; do refuse --busy-poll-us "$kvbench" --busy-poll-us "$v"; done

# conduit-kv: the same validation as CONFIG SET (one table), plus its own --busy-poll-us.
for v in nan -1 65536; do refuse --port "$kv" --port "$v"; done
for v in nan 0 501; do refuse --hz "$kv" --hz "$v"; done
for v in nan 0 -1 1000001; do refuse --maxclients "$kv" --maxclients "$v"; done
for v in nan 0 100001; do refuse --databases "$kv" --databases "$v"; done
for v in nan -1 2147483648; do refuse --timeout "$kv" --timeout "$v"; done
for v in nan -2 65536; do refuse --rdma-port "$kv" --rdma-port "$v"; done
for v in nan -1 1000001; do refuse --shm-busy-poll-us "$kv" --shm-busy-poll-us "$v"; done
for v in nan 0 129; do refuse --io-threads "$kv" --io-threads "$v"; done
for v in nan -1 2147483648; do refuse --auto-aof-rewrite-percentage "$kv" --auto-aof-rewrite-percentage "$v"; done
for v in nan -1 1kb; do refuse --proto-max-bulk-len "$kv" --proto-max-bulk-len "$v"; done
for v in nan -1 1kb; do refuse --client-query-buffer-limit "$kv" --client-query-buffer-limit "$v"; done
for v in nan -1 10; do refuse --client-output-pause-bytes "$kv" --client-output-pause-bytes "$v"; done
for v in nan -1 inf; do refuse --maxmemory "$kv" --maxmemory "$v"; done
for v in nan -1; do refuse --auto-aof-rewrite-min-size "$kv" --auto-aof-rewrite-min-size "$v"; done
for v in "normal nan 0 0" "normal 1mb 0 -1" "normal 0 0 4294967296"; do
  refuse --client-output-buffer-limit "$kv" --client-output-buffer-limit "$v"
done
for v in nan -1 1000001; do refuse --busy-poll-us "$kv" --busy-poll-us "$v"; done

for v in nan -1 0 65536; do refuse --port "$perf" send_lat -p "$v"; done
for v in nan 0 -1 9M 99G; do refuse --size "$perf" send_lat -s "$v"; done
for v in nan 4 100000001; do refuse --iters "$perf" send_lat -n "$v"; done
for v in nan 0 86401; do refuse --duration "$perf" send_lat -D "$v"; done
for v in nan 0 15001; do refuse --tx-depth "$perf" send_lat -t "$v"; done
for v in nan 0 16385; do refuse --rx-depth "$perf" send_lat -r "$v"; done
for v in nan 0 1025; do refuse --cq-mod "$perf" send_lat -Q "$v"; done
for v in nan -1 913; do refuse --inline-size "$perf" send_lat -I "$v"; done
for v in nan 0 15001; do refuse --post-list "$perf" send_bw -l "$v"; done
for v in nan 0 86401; do refuse --timeout "$perf" send_lat --timeout "$v"; done

fu=(--url tcp://127.0.0.1:0)
for v in nan 0 4097; do refuse --conns "$fanin" "${fu[@]}" -c "$v"; done
for v in nan inf 0 3601; do refuse --duration "$fanin" "${fu[@]}" -D "$v"; done
for v in nan -1 61; do refuse --warmup "$fanin" "${fu[@]}" -w "$v"; done
for v in nan 0 3601; do refuse --timeout "$fanin" "${fu[@]}" --timeout "$v"; done
for v in nan 0 -1K 65M; do refuse --size "$fanin" "${fu[@]}" -s "$v"; done

# Good values still work (and sizes with suffixes mean powers of 1024).
if ! timeout 30 "$bench" stream --loopback tcp://127.0.0.1:0 -s 1K -D 0.05 -w 0 --timeout 5 --json >"$out" 2>&1 ||
  ! grep -q '"size":1024' "$out"; then
  echo "FAIL: a valid conduit-bench run: $(head -c 300 "$out")"
  fails=$((fails + 1))
fi
if ! timeout 30 "$fanin" --url tcp://127.0.0.1:0 -c 2 -s 4K -D 0.1 -w 0 --json >"$out" 2>&1; then
  echo "FAIL: a valid conduit-fanin run: $(head -c 300 "$out")"
  fails=$((fails + 1))
fi

if ((fails > 0)); then
  echo "numeric_flags_test: $fails failures"
  exit 1
fi
echo "numeric_flags_test: every bad value refused"
