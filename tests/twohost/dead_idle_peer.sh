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
#      KNOWN FAILURE on Soft-RoCE: rxe treats retry_cnt 7 as "retry forever" (rxe_comp.c:
#      `if (qp->comp.retry_cnt != 7) qp->comp.retry_cnt--`; the IB spec makes only
#      rnr_retry 7 infinite), so the QP never reaches retry-exceeded, the dead peer is never
#      detected and its QP and MRs are held for good.  On an HCA that follows the spec the
#      default budget is 7 x 537 ms.  Needs a fix in the transport (e.g. a default below 7, or
#      the server overriding the QP's retry count at its RTS transition).
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
line2=$(wait_for a srv '^done id=2 ' 10) || true
# Idle connections make no progress: the time to detection is measured from the kill.
stall1=$([[ -n $line1 ]] && echo "$seen1" || true)
stall2=$([[ -n $line2 ]] && ms_since "$killed" || true)
say "server, client 1: ${line1:-no end}"
say "server, client 2: ${line2:-no end}"
check "retry_cnt=6&timeout=14: the server finds the dead idle peer by its own keepalive sends within ${BOUND_MS} ms (${stall1:-never} ms after the kill: $(field "$line1" error))" \
	le "${stall1:-999999}" "$BOUND_MS"
result "fault=dead-idle-valkey-peer qp=retry_cnt=6,timeout=14 detect_ms=${stall1:-never} error=\"$(field "$line1" error)\""
check "KNOWN FAILURE (rxe: retry_cnt 7 = forever): with the default QP settings the server finds the dead idle peer within ${BOUND_MS} ms (${stall2:-never} ms after the kill: $(field "$line2" error))" \
	le "${stall2:-999999}" "$BOUND_MS"
result "fault=dead-idle-valkey-peer qp=default detect_ms=${stall2:-never} error=\"$(field "$line2" error)\" server_rc_qps_left=$(qp_count a "$pid")"
finish
