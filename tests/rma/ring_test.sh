#!/usr/bin/env bash
# conduit-ring (issue 14, section 4): ring AllReduce and AllGather with N = 2, 3, 4 ranks over
# one scheme, every element checked by the tool itself (its exit status says so).
#
#   ring_test.sh <conduit-ring> tcp|shm|rdma [bytes]
#
# rdma runs in the Soft-RoCE guest on $CONDUIT_RDMA_ADDR (the testbed sets it; 192.0.2.1).
# Each run is bounded: the tool's own per-wait timeout and `timeout` around it.
set -uo pipefail
ring=$1
scheme=$2
bytes=${3:-1228800}  # a multiple of 4 * 2, 3 and 4
case $scheme in
  tcp) url=tcp://127.0.0.1:0 ;;
  shm) url=shm://ring-test-$$ ;;
  rdma) url=rdma://${CONDUIT_RDMA_ADDR:-192.0.2.1}:0 ;;
  *) echo "ring_test.sh: unknown scheme $scheme" >&2; exit 2 ;;
esac
fail=0
for n in 2 3 4; do
  for op in allreduce allgather; do
    out=$(timeout 240 "$ring" --ranks "$n" --op "$op" --bytes "$bytes" --iters 3 --warmup 1 --timeout 120 --url "$url" 2>&1)
    rc=$?
    echo "$out"
    if ((rc != 0)) || ! grep -q "^# $op over $n ranks: every element checked" <<<"$out"; then
      echo "FAIL: $op over $n ranks on $scheme (exit $rc)"
      fail=1
    fi
  done
done
((fail == 0)) && echo "PASS: allreduce and allgather over 2, 3 and 4 ranks on $scheme"
exit $fail
