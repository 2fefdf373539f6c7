#!/usr/bin/env bash
# tools_test.sh CONDUIT_RPC_BENCH CONDUIT_RPC PROTO_DIR: the tools against a real server,
# over tcp:// and shm://: a call with JSON in and out, metadata, an error's code and exit
# status, status and list, a call with --proto, a bad flag.
set -euo pipefail
bench=$1 rpc=$2 protos=$3
work=$(mktemp -d)
shm=rpc-tools-$$
port_log=$work/server.log
"$bench" server -l tcp://127.0.0.1:0 -l "shm://$shm" --seconds 60 >"$port_log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 200); do
  [[ $(grep -c '^listening' "$port_log" || true) == 2 ]] && break
  sleep 0.05
done
tcp=$(grep '^listening tcp' "$port_log" | cut -d' ' -f2)
[[ -n $tcp ]] || { cat "$port_log"; exit 1; }
for url in "$tcp" "shm://$shm"; do
  out=$("$rpc" call "$url" conduit.rpc.echo.EchoService/Echo '{"payload":"aGVsbG8="}' -H trace-id=t1 2>"$work/err")
  grep -q '"payload": "aGVsbG8="' <<<"$out" || { echo "bad response: $out"; exit 1; }
  grep -q 'trace-id: t1' "$work/err" || { echo "no trace-id metadata"; cat "$work/err"; exit 1; }
  set +e
  "$rpc" call "$url" conduit.rpc.echo.EchoService/Echo '{"failCode":5,"failText":"no such thing"}' 2>"$work/err"
  rc=$?
  set -e
  [[ $rc == 1 ]] || { echo "error call exited $rc"; exit 1; }
  grep -q 'invalid-argument: no such thing' "$work/err" || { cat "$work/err"; exit 1; }
done
"$rpc" status "$tcp" | tee "$work/status" | grep -q 'conduit.rpc.echo.EchoService/Echo'
grep -q '^shm ' "$work/status" || grep -q '^tcp ' "$work/status"
"$rpc" status "$tcp" --json | grep -q '"wireVersion": 1'
"$rpc" list "$tcp" | grep -q 'Chat(stream conduit.rpc.echo.EchoRequest) returns (stream'
"$rpc" call "$tcp" conduit.rpc.echo.EchoService/Echo '{"responseSize":3}' --proto conduit/rpc/echo.proto -I "$protos" |
  grep -q '"payload": "cnJy"'
set +e
"$rpc" call "$tcp" nope '{}' 2>/dev/null
[[ $? == 1 ]] || { echo "a bad method name must fail"; exit 1; }
"$rpc" call "$tcp" conduit.rpc.echo.EchoService/Echo '{not json' 2>"$work/err"
[[ $? == 1 ]] && grep -q 'request JSON' "$work/err" || { echo "bad JSON must fail clearly"; exit 1; }
set -e
echo "rpc tools test: OK"
