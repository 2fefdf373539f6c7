#!/usr/bin/env bash
# System calls per read and write of an unmodified program, plain TCP vs under conduit-run
# over shm (issue 12: "an accelerated connection with data ready makes no system call per
# read or write").
#
#   bench/preload_syscalls.sh [--build DIR] [--messages N] [--variants "tcp shm"] [--addr A]
#   testbed/run -- bash bench/preload_syscalls.sh --variants "tcp rdma" --addr 192.0.2.1
#
# Variants: tcp (as they are), shm (`conduit-run --mode shm`), shm-poll (the same with
# --spin-us 100: waits poll before they sleep), rdma (`conduit-run --mode rdma`, in the
# Soft-RoCE guest on its rxe address: rxe does not serve 127.0.0.1).
#
# 1. Data ready: a Python writer sends N 16-byte messages (one send() each); the reader
#    waits until all of them are there, then reads them with N recv(16) calls.  Both run
#    under `strace -f`; the script counts every system call each process makes between two
#    markers (close(987), which fails with EBADF) around the loop.  TCP: N sendto and N
#    recvfrom.  shm: the claim is 0.
# 2. A request/response loop: `strace -c -f` of redis-benchmark -t get -c 1 -P 1 -n N
#    against a redis-server of the same variant (the waits: with one connection and no
#    pipelining every request has the client wait for its answer, so system calls remain:
#    the wait's look at the program's own fds, and a doorbell when the peer slept).
# Traffic stays on 127.0.0.1 (or the guest's address); every run is bounded (60 s).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
build=$REPO/build
n=10000
variants="tcp shm"
addr=127.0.0.1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --messages) n=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --addr) addr=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
RUN=$build/tools/run/conduit-run
[[ -x $RUN ]] || { echo "conduit-run not built in $build" >&2; exit 1; }
for t in strace python3 redis-server redis-benchmark; do
  command -v $t >/dev/null || { echo "$t not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/preload-syscalls-XXXXXX)
export TMPDIR=$work
unset XDG_RUNTIME_DIR
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
bench_cleanup_on_exit

cat >"$work/ready.py" <<'EOF'
import os, socket, sys, time
def mark():
    try: os.close(987)
    except OSError: pass
port, n, addr = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if sys.argv[1] == "s":
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((addr, port)); l.listen(1)
    c, _ = l.accept()
    assert c.recv(1) == b"g"
    time.sleep(0.5)  # every message has arrived (ring or socket buffer)
    mark()
    got = 0
    while got < 16 * n:
        got += len(c.recv(16))
    mark()
    c.sendall(b"k")
else:
    for attempt in range(200):  # the reader starts slowly under strace on a loaded machine
        try:
            c = socket.create_connection((addr, port)); break
        except ConnectionRefusedError:
            time.sleep(0.1)
    else:
        sys.exit("writer: the reader never listened")
    c.sendall(b"g")
    m = b"x" * 16
    mark()
    for i in range(n):
        c.send(m)
    mark()
    assert c.recv(1) == b"k"
EOF
span() {  # span STRACE_FILE ROLE: the system calls of the marked process between its markers
  python3 - "$1" "$2" <<'EOF'
import collections, re, sys
marks = collections.Counter(); calls = collections.defaultdict(collections.Counter)
for line in open(sys.argv[1]):
    m = re.match(r"(\d+)\s+(\w+)\((.*)", line)
    if not m: continue
    pid, call, rest = m.groups()
    # "close(987 <unfinished ...>" when another thread's call cut in (strace -f)
    if call == "close" and (rest.startswith("987)") or rest.startswith("987 <unfinished")): marks[pid] += 1; continue
    if marks[pid] == 1: calls[pid][call] += 1
done = [p for p, k in marks.items() if k >= 2]
if not done: print(f"  {sys.argv[2]}: markers not found"); sys.exit(0)
c = calls[done[0]]
detail = ", ".join(f"{k} {v}" for k, v in c.most_common(6)) or "none"
print(f"  {sys.argv[2]}: {sum(c.values())} system calls ({detail})")
EOF
}
wrap() {
  case $1 in
    shm) echo "$RUN --mode shm --log warn --" ;;
    shm-poll) echo "$RUN --mode shm --spin-us 100 --log warn --" ;;
    rdma) echo "$RUN --mode rdma --timeout-ms 30000 --log warn --" ;;
    *) echo "" ;;
  esac
}
for v in $variants; do
  case $v in tcp|shm|shm-poll|rdma) ;; *) echo "unknown variant $v (tcp, shm, shm-poll, rdma)" >&2; exit 2 ;; esac
done

echo "preload syscalls: $n messages; load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%SZ)"
echo "1. data ready: $n send(16) by the writer, then $n recv(16) by the reader"
for v in $variants; do
  p=$(free_port)
  # shellcheck disable=SC2046
  timeout 60 strace -f -o "$work/$v.reader" $(wrap $v) python3 "$work/ready.py" s "$p" "$n" "$addr" &
  pids+=($!)
  sleep 1
  # shellcheck disable=SC2046
  timeout 60 strace -f -o "$work/$v.writer" $(wrap $v) python3 "$work/ready.py" c "$p" "$n" "$addr"
  wait "${pids[-1]}"
  echo " $v:"
  span "$work/$v.writer" "writer, $n sends"
  span "$work/$v.reader" "reader, $n recvs"
done

echo "2. redis-benchmark -t get -c 1 -P 1 -n $n under strace -c -f (calls per request)"
for v in $variants; do
  p=$(free_port)
  # shellcheck disable=SC2046
  $(wrap $v) redis-server --port "$p" --bind "$addr" --protected-mode no --save '' --appendonly no --dir "$work" \
    --logfile "$work/redis-$v.log" >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do
    # shellcheck disable=SC2046
    [[ $(timeout 40 $(wrap $v) redis-cli -h "$addr" -p "$p" ping 2>/dev/null) == PONG ]] && break
    sleep 0.2
  done
  # shellcheck disable=SC2046
  timeout 120 strace -c -f -o "$work/$v.summary" $(wrap $v) redis-benchmark -h "$addr" -p "$p" -t get -c 1 -P 1 -d 3 -n "$n" \
    --csv >"$work/$v.rb" 2>&1 || true
  python3 - "$work/$v.summary" "$n" "$v" <<'EOF'
import sys
n = int(sys.argv[2]); rows = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        rows.append((int(f[3]), f[-1]))
rows.sort(reverse=True)
print(f"  {sys.argv[3]}: " + ", ".join(f"{name} {calls / n:.2f}" for calls, name in rows[:6] if calls >= n // 10))
EOF
done
