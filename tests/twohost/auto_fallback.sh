#!/usr/bin/env bash
# auto:// when RDMA is black-holed between the hosts (b drops every RoCEv2 packet it sends,
# TCP still passes): the first connection falls back to TCP after rdma_timeout_ms, the next
# one within rdma_retry_ms starts on TCP at once, and once RDMA works again a connection
# after the retry time uses RDMA.  Every stream is checked byte for byte.
. "$(dirname "$0")/lib.sh" "$1"

start_stream_server a srv "auto://$A:7601?$KA_AUTO" >/dev/null
"$G" b net drop-roce
url="auto://$A:7601?$KA_AUTO&rdma_timeout_ms=1500&rdma_retry_ms=8000"
# Connections at 0 s, 7 s and 14 s from one process (the retry schedule is per process).
# The first fallback ends after 1.5 s (up to ~6 s on a loaded host), so the retry window
# ends between 9.5 and ~14 s: the second connection is inside it, the third after it.
"$G" b start c -- "$STREAM" send "$url" "$url" "$url" --stagger 7 --bytes 1000000 --timeout 120
c2=$(wait_for b c '^connected id=2 ' 60) || true
"$G" b net clear
say "RoCE passes again ($(field "$c2" transport) for connection 2)"
rc=0
out=$("$G" b wait c --timeout 120) || rc=$?
for i in 1 2 3; do
	conn[i]=$(grep "^connected id=$i " <<<"$out" | tail -n 1)
	done_[i]=$(grep "^done id=$i " <<<"$out" | tail -n 1)
	say "connection $i: $(field "${conn[i]}" transport) in $(field "${conn[i]}" connect_ms) ms, $(field "${done_[i]}" result)"
done
check "every stream arrived intact (exit $rc)" [ "$rc" = 0 ]
check "1: RDMA black-holed, falls back to TCP after rdma_timeout_ms ($(field "${conn[1]}" connect_ms) ms)" \
	[ "$(field "${conn[1]}" transport)" = tcp -a "$(field "${conn[1]}" connect_ms)" -ge 1400 ]
check "2: within rdma_retry_ms it starts on TCP without trying RDMA ($(field "${conn[2]}" connect_ms) ms)" \
	[ "$(field "${conn[2]}" transport)" = tcp -a "$(field "${conn[2]}" connect_ms)" -lt 1400 ]
check "3: after the retry time, with RoCE passing again, it is back on RDMA" [ "$(field "${conn[3]}" transport)" = rdma ]
result "fault=roce-blackholed auto_fallback_ms=$(field "${conn[1]}" connect_ms) within_retry_ms=$(field "${conn[2]}" connect_ms)" \
	"after_retry=$(field "${conn[3]}" transport)"
finish
