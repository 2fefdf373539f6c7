#!/usr/bin/env bash
# A client host dies while its connection is idle, and the client is Valkey-style: it sends
# no keepalives and negotiates no extensions, so the server's keepalive timeout does not
# apply to it (an idle Valkey client is not a dead one).  What must find the dead peer is
# the server's own periodic send (a Keepalive every keepalive_ms): unacknowledged, the QP
# retries it and fails with retry-exceeded, within the QP's retry budget
# (retry_cnt x 4.096 us x 2^timeout; rdma_cm's RoCE default: 7 x ~2-4 s).
#
# KNOWN FAILURE on Soft-RoCE: src/verbs/cm.cc connects every QP with retry_count 7, and
# rxe treats retry_cnt 7 as "retry forever" (rxe_comp.c: `if (qp->comp.retry_cnt != 7)
# qp->comp.retry_cnt--`; the IB spec makes only rnr_retry 7 infinite).  The QP never
# reaches retry-exceeded, so the dead peer is never detected and its QP and MRs are held
# for good.  Fixed when the rdma:// retry settings become URL options with a default below 7.
. "$(dirname "$0")/lib.sh" "$1"

BOUND_MS=${CONDUIT_TWOHOST_RETRY_BOUND_MS:-45000}
pid=$(start_stream_server a srv "rdma://$A:7501?keepalive_ms=500")
"$G" b start idle -- "$STREAM" send "rdma://$A:7501?features=none&keepalive_ms=0" --idle --timeout 600
wait_for a srv '^connected ' 60 >/dev/null
sleep 2
qp1=$(qp_count a "$pid")
say "an idle Valkey-style client from b is connected (server QPs: $qp1); killing b"
"$G" b kill
line=$(wait_for a srv '^done id=1 ' $((BOUND_MS / 1000 + 5))) || true
stall=$(field "$line" stall_ms)
say "server: ${line:-no end of the connection within $((BOUND_MS / 1000 + 5)) s}"
check "KNOWN FAILURE (rxe: retry_cnt 7 = forever): the server finds the dead idle peer within ${BOUND_MS} ms by its own keepalive sends (stall ${stall:-none} ms: $(field "$line" error))" \
	le "${stall:-999999}" "$BOUND_MS"
result "fault=dead-idle-valkey-peer side=server detect_ms=${stall:-never} error=\"$(field "$line" error)\" qps_held=$(qp_count a "$pid")"
finish
