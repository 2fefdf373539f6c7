#!/usr/bin/env bash
# Runs one family test program twice -- without the preload and with it (shm or rdma, every
# connection expected to go fast) -- and compares the transcripts line by line.
#
#   run_family.sh <program> <libconduit-preload.so> [shm|rdma]
#
# rdma (in the Soft-RoCE guest) listens and connects on $CONDUIT_PRELOAD_TEST_ADDR, by default
# the guest's rxe address 192.0.2.1 (rxe does not serve the loopback device).
# Each run is bounded (60 s).  The preloaded run uses its own status directory (TMPDIR) so
# parallel tests do not see each other's files, and must leave no status file behind.
set -uo pipefail
prog=$1
lib=$2
mode=${3:-shm}
if [[ $mode == rdma ]]; then
  export CONDUIT_PRELOAD_TEST_ADDR=${CONDUIT_PRELOAD_TEST_ADDR:-192.0.2.1}
  export CONDUIT_PRELOAD_RDMA=${CONDUIT_PRELOAD_RDMA:-connect_timeout_ms=60000}
  export CONDUIT_PRELOAD_TIMEOUT_MS=${CONDUIT_PRELOAD_TIMEOUT_MS:-30000}  # rdma_cm under TCG is slow
fi
name=$(basename "$prog")
work=$(mktemp -d /tmp/conduit-family-XXXXXX)
trap 'rm -rf "$work"' EXIT
unset XDG_RUNTIME_DIR

TMPDIR=$work timeout 60 "$prog" >"$work/plain.out" 2>"$work/plain.err"
rc=$?
if ((rc != 0)); then
  echo "FAIL: $name without the preload (exit $rc)"
  cat "$work/plain.err"
  exit 1
fi
TMPDIR=$work CONDUIT_TEST_EXPECT_FAST=1 CONDUIT_PRELOAD_MODE=$mode CONDUIT_PRELOAD_LOG=${CONDUIT_PRELOAD_LOG:-warn} \
  LD_PRELOAD=$lib timeout 60 "$prog" >"$work/preload.out" 2>"$work/preload.err"
rc=$?
if ((rc != 0)); then
  echo "FAIL: $name with the preload (exit $rc)"
  cat "$work/preload.err"
  echo "--- transcript so far:"
  cat "$work/preload.out"
  exit 1
fi
if ! diff -u "$work/plain.out" "$work/preload.out"; then
  echo "FAIL: $name: the transcripts differ (- without, + with the preload)"
  cat "$work/preload.err"
  exit 1
fi
left=$(find "$work" -name '*.status' | wc -l)
if ((left != 0)); then
  echo "FAIL: $name: $left status file(s) left behind"
  exit 1
fi
cat "$work/preload.out"
echo "PASS: $name over $mode ($(wc -l <"$work/plain.out") lines, the same with and without the preload)"
