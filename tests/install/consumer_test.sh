#!/usr/bin/env bash
# consumer_test.sh BUILD_DIR WORK_DIR: install BUILD_DIR into WORK_DIR/prefix, then build and
# run a consumer with find_package(conduit) and with pkg-config.
set -euo pipefail
build=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
cmake=${CMAKE:-cmake}
cxx=${CXX:-c++}
rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log"
test -f "$work/prefix/include/conduit/verbs/verbs.h"
test -f "$work/prefix/lib/cmake/conduit/conduitConfig.cmake" || test -f "$work/prefix/lib64/cmake/conduit/conduitConfig.cmake"

# The installed libraries may carry sanitizer instrumentation (a CONDUIT_SANITIZE build);
# then the consumer must link the sanitizer runtimes too.
extra=()
syms=$(nm "$work/prefix"/lib*/libconduit_base.a 2>/dev/null || true)
if [[ $syms == *__asan_* ]]; then
  extra=(-fsanitize=address,undefined)
fi
"$cmake" -S "$here/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_EXE_LINKER_FLAGS="${extra[*]}" >"$work/configure.log"
"$cmake" --build "$work/cmake-build" >"$work/build.log"
"$work/cmake-build/consumer" | tee "$work/run-cmake.log"
grep -q "consumer ok" "$work/run-cmake.log"

pcdir=$(dirname "$(find "$work/prefix" -name conduit.pc | head -n1)")
# shellcheck disable=SC2046
"$cxx" -std=c++20 "${extra[@]}" "$here/consumer/main.cc" -o "$work/consumer-pc" \
  $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs --static conduit)
"$work/consumer-pc" | tee "$work/run-pc.log"
grep -q "consumer ok" "$work/run-pc.log"
echo "install consumer test: OK"
