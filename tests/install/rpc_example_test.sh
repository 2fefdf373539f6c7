#!/usr/bin/env bash
# rpc_example_test.sh BUILD_DIR WORK_DIR: install BUILD_DIR into WORK_DIR/prefix, build
# examples/greeter against it, and call it over tcp:// and shm:// (same binaries, another URL).
set -euo pipefail
build=$1
work=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
cmake=${CMAKE:-cmake}
cxx=${CXX:-c++}
rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log"
test -f "$work/prefix/include/conduit/rpc/server.h"
test -f "$work/prefix/include/conduit/rpc/status.pb.h"
extra=()
if [[ $(nm "$work/prefix"/lib*/libconduit_base.a 2>/dev/null || true) == *__asan_* ]]; then
  extra=(-fsanitize=address,undefined)
fi
"$cmake" -S "$repo/examples/greeter" -B "$work/greeter" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_EXE_LINKER_FLAGS="${extra[*]}" >"$work/configure.log"
"$cmake" --build "$work/greeter" >"$work/build.log"
shm=greeter-test-$$
"$work/greeter/greeter_server" tcp://127.0.0.1:0 "shm://$shm" >"$work/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 200); do
  [[ $(grep -c '^listening' "$work/server.log" || true) == 2 ]] && break
  sleep 0.05
done
tcp=$(grep '^listening tcp' "$work/server.log" | cut -d' ' -f2)
"$work/greeter/greeter_client" "$tcp" world | tee "$work/tcp.log"
grep -q 'Hello, world! (over tcp' "$work/tcp.log"
"$work/greeter/greeter_client" "shm://$shm" world | tee "$work/shm.log"
grep -q 'Hello, world! (over shm' "$work/shm.log"
echo "rpc example test: OK"
