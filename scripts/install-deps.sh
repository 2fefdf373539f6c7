#!/usr/bin/env bash
# Installs everything Conduit needs to build, test and run its demo on Debian 12, as root.
# Idempotent: packages already present are not reinstalled; `apt-get update` runs only when
# something is missing.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config python3
  # RDMA userland: headers, providers (rxe), tools, perftest for comparisons
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
  # libraries
  libgtest-dev libgmock-dev libcli11-dev
  # kv: libFuzzer for the RESP fuzz test; Debian's redis-cli/redis-benchmark/redis-server for
  # integration tests and comparisons; sockperf for the stream benchmark's peer
  clang libclang-rt-dev redis-tools redis-server sockperf
  # memory-layer micro-benchmarks (bench/memory_micro.sh): Google Benchmark, mimalloc as a
  # peer allocator; gnuplot draws the benchmark scripts' plots
  libbenchmark-dev libmimalloc-dev gnuplot-nox
  # kv: strace shows the AOF fsync before each reply under appendfsync always (kv_fsync_order_test)
  strace
  # rpc: protobuf (generic services, JSON mapping, libprotoc for conduit-rpc --proto); gRPC
  # C++ for the comparison peer (bench/rpc_vs_grpc.sh); gnuplot for the benchmark plots
  libprotobuf-dev libprotoc-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc gnuplot-nox
  # Soft-RoCE testbed: qemu guest booting Debian's kernel with a busybox initramfs
  qemu-system-x86 busybox-static kmod iproute2 cpio xz-utils zstd procps
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
