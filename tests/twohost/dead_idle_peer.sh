#!/usr/bin/env bash
# A client host dies while its connection is idle, and the client is Valkey-style: it sends
# no keepalives and negotiates no extensions, so the server's keepalive timeout does not
# apply to it (an idle Valkey client is not a dead one).  What must find the dead peer is
# the server's own periodic send (a Keepalive every keepalive_ms): unacknowledged, the QP
# retries it and fails with retry-exceeded, within the QP's retry budget
# (retry_cnt x 4.096 us x 2^timeout; rdma_cm's RoCE default: 7 x ~2-4 s).
#
# Two such clients from b, killed together:
#   1. with a short retry budget (retry_cnt=6&timeout=14: 6 x 67 ms): the server's QP takes
#      its retry_count from the client's connect request (ib_cm), so this is the client's
#      choice.  Expected: the server sees "retry exceeded" well within BOUND_MS.
#   2. with the defaults (retry_cnt=7, timeout=17), i.e. what a real Valkey client asks for.
#      Soft-RoCE treats retry_cnt 7 as "retry forever" (rxe_comp.c: `if (qp->comp.retry_cnt
#      != 7) qp->comp.retry_cnt--`), so the QP never reaches retry-exceeded; what must find
#      the peer is the server's acknowledgement watchdog (its sends stay unacknowledged for
#      keepalive_timeout_ms, default 10 s: docs/FAILURES.md).  Its QP must be released.
. "$(dirname "$0")/lib.sh" "$1"

BOUND_MS=${CONDUIT_TWOHOST_RETRY_BOUND_MS:-30000}
pid=$(start_stream_server a srv "rdma://$A:7501?keepalive_ms=500&timeout=14")
"$G" b start short -- "$STREAM" send "rdma://$A:7501?features=none&keepalive_ms=0&retry_cnt=6&timeout=14" \
	--idle --timeout 600
wait_for a srv '^connected id=1 ' 60 >/dev/null
"$G" b start default -- "$STREAM" send "rdma://$A:7501?features=none&keepalive_ms=0" --idle --timeout 600
wait_for a srv '^connected id=2 ' 60 >/dev/null
sleep 2
say "two idle Valkey-style clients from b are connected (server RC QPs: $(qp_count a "$pid")); killing b"
"$G" b kill
killed=$EPOCHREALTIME
line1=$(wait_for a srv '^done id=1 ' $((BOUND_MS / 1000 + 5))) || true
seen1=$(ms_since "$killed")
line2=$(wait_for a srv '^done id=2 ' $((BOUND_MS / 1000 + 5))) || true
# Idle connections make no progress: the time to detection is measured from the kill.
stall1=$([[ -n $line1 ]] && echo "$seen1" || true)
stall2=$([[ -n $line2 ]] && ms_since "$killed" || true)
say "server, client 1: ${line1:-no end}"
say "server, client 2: ${line2:-no end}"
check "retry_cnt=6&timeout=14: the server finds the dead idle peer by its own keepalive sends within ${BOUND_MS} ms (${stall1:-never} ms after the kill: $(field "$line1" error))" \
	le "${stall1:-999999}" "$BOUND_MS"
result "fault=dead-idle-valkey-peer qp=retry_cnt=6,timeout=14 detect_ms=${stall1:-never} error=\"$(field "$line1" error)\""
check "with the default QP settings (retry_cnt=7: forever on rxe) the server's acknowledgement watchdog finds the dead idle peer within ${BOUND_MS} ms (${stall2:-never} ms after the kill: $(field "$line2" error))" \
	le "${stall2:-999999}" "$BOUND_MS"
# Both dead peers' QPs must be released (a connection is destroyed right after its end).
left=$(qp_count a "$pid")
for _ in 1 2 3 4 5 6 7 8 9 10; do
	[[ $left == 0 ]] && break
	sleep 0.5
	left=$(qp_count a "$pid")
done
check "the dead peers' QPs are released (server RC QPs left: $left)" le "$left" 0
result "fault=dead-idle-valkey-peer qp=default detect_ms=${stall2:-never} error=\"$(field "$line2" error)\" server_rc_qps_left=$left"
finish
