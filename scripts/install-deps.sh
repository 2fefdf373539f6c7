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
  # preload: iperf3 is one of the unmodified programs bench/preload.sh runs through each preload
  iperf3
  # memory-layer micro-benchmarks (bench/memory_micro.sh): Google Benchmark, mimalloc as a
  # peer allocator; gnuplot draws the benchmark scripts' plots
  libbenchmark-dev libmimalloc-dev gnuplot-nox
  # kv: strace shows the AOF fsync before each reply under appendfsync always (kv_fsync_order_test);
  # tcl runs Redis' own test suite against conduit-kv (kv_redis_suite; its source comes from
  # Debian's source package, fetched below); dpkg-dev unpacks it (apt-get source)
  strace tcl dpkg-dev
  # rpc: protobuf (generic services, JSON mapping, libprotoc for conduit-rpc --proto); gRPC
  # C++ for the comparison peer (bench/rpc_vs_grpc.sh); gnuplot for the benchmark plots
  libprotobuf-dev libprotoc-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc gnuplot-nox
  # Soft-RoCE testbed: qemu guest booting Debian's kernel with a busybox initramfs
  qemu-system-x86 busybox-static kmod iproute2 cpio xz-utils zstd procps
)

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi

# Redis' TCL test suite is in Debian's source package of redis (kv_redis_suite): apt-get
# source needs deb-src entries.  Added once, mirroring the binary entries this machine has.
deb_src=/etc/apt/sources.list.d/conduit-deb-src.sources
need_update=0
if [[ ! -e $deb_src ]] && ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  src=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -e $f ]] && grep -q 'debian' "$f" && src+=$(sed -E 's/^Types:.*/Types: deb-src/' "$f")$'\n\n'
  done
  if [[ -z $src && -e /etc/apt/sources.list ]]; then
    # One-line format: turn the Debian "deb" lines into deb822 deb-src stanzas.
    while read -r _ uri suite comps; do
      src+="Types: deb-src"$'\n'"URIs: $uri"$'\n'"Suites: $suite"$'\n'"Components: $comps"$'\n\n'
    done < <(grep -E '^deb +[^[]*debian' /etc/apt/sources.list)
  fi
  if [[ -n $src ]]; then
    echo "install-deps: adding deb-src entries ($deb_src) for Redis' test suite"
    printf '%s' "$src" | $SUDO tee "$deb_src" >/dev/null
    need_update=1
  else
    echo "install-deps: warning: no Debian apt source found to derive a deb-src entry from" >&2
  fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

export DEBIAN_FRONTEND=noninteractive
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  if ((need_update)); then $SUDO apt-get update -qq; fi
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The source of the installed redis-server's version, for its tests (cached).
bash "$(dirname "$0")/../tests/kv/redis_suite/fetch.sh"
echo "install-deps: done"
