#!/usr/bin/env bash
# Host a (the servers) dies mid-stream.  On the surviving client host b: the stream to a
# fails within the bound while the same process's stream to a server on b goes on; the kv
# client (reconnecting, kv::ReconnectOptions) reports the loss, fails the calls whose
# outcome it cannot know (never re-sending them), and reconnects by itself once a is back
# and conduit-kv restarted from its AOF; no acknowledged write is lost.
. "$(dirname "$0")/lib.sh" "$1"

start_stream_server a srv "rdma://$A:7401?$KA" >/dev/null
start_stream_server b srv-b "rdma://$B:7402?$KA" >/dev/null
mkdir -p "$WORK/kv"
kv_args=(--port 6390 --bind "$A" --listen "rdma://$A:6391?$KA" --appendonly yes --appendfsync always
	--dir "$WORK/kv" --protected-mode no --loglevel warning)
"$G" a start kv -- "$KV" "${kv_args[@]}"
wait_for a kv 'ready to accept' 60 >/dev/null

# One process on b, two streams: id 1 to a, id 2 to b's own server.
"$G" b start streams -- "$STREAM" send "rdma://$A:7401?$KA" "rdma://$B:7402?$KA" --bytes 30000000 \
	--rate 1000000 --timeout 200
"$G" b start load -- "$KVCHECK" load "rdma://$A:6391?$KA" --log "$WORK/acks" --prefix s --count 6000 \
	--reconnect --timeout 400
wait_for b streams '^progress id=1 ' 60 >/dev/null
wait_acks "$WORK/acks" 300 90 || fail "the kv load got no 300 acknowledgements within 90 s"

say "killing a ($(acks "$WORK/acks") SETs acknowledged so far)"
"$G" a kill
killed_at=$SECONDS
killed=$EPOCHREALTIME
line=$(wait_for b streams '^done id=1 ' 30) || true
seen=$(ms_since "$killed")
say "stream to a: $line"
stall=$(field "$line" stall_ms)
check "the stream to the dead host fails within ${DETECT_BOUND_MS} ms (stall ${stall} ms: $(field "$line" error))" \
	le "$stall" "$DETECT_BOUND_MS"
result "fault=server-host-killed side=client detect_ms=$stall seen_by_host_ms=$seen error=\"$(field "$line" error)\""
ev=$(wait_for b load '^event state=backoff' 30) || true
say "kv client: $ev"
check "the kv client saw the loss and backs off ($(field "$ev" cause))" [ -n "$ev" ]

# a comes back; conduit-kv restarts from its AOF (same dir, on the shared folder).
start=$SECONDS
"$G" a boot
"$G" a start kv2 -- "$KV" "${kv_args[@]}"
wait_for a kv2 'ready to accept' 60 >/dev/null
say "a and conduit-kv back $((SECONDS - killed_at)) s after the kill"
back=$SECONDS
ready=$(wait_for b load "^event state=ready .*reconnects=1" 120) || true
say "kv client: $ready (reconnected ~$((SECONDS - back)) s after the server was back)"

rc=0
out=$("$G" b wait load --timeout 300) || rc=$?
summary=$(grep '^load ' <<<"$out" | tail -n 1)
say "load: $summary"
check "the kv load finished through the restart by reconnecting ($summary)" \
	[ "$rc" = 0 -a "$(field "$summary" reconnects)" -ge 1 ]
check "the unanswered calls were reported, not re-sent (uncertain=$(field "$summary" uncertain))" \
	[ "$(acks "$WORK/acks" '^uncertain')" = "$(field "$summary" uncertain)" ]
out=$("$G" b run --timeout 120 -- "$KVCHECK" check "rdma://$A:6391" --log "$WORK/acks") || true
say "restarted server: $out"
check "the server restarted from its AOF has every acknowledged write, INCRs within bounds" grep -q 'result=ok' <<<"$out"
result "fault=server-host-killed kv_reconnects=$(field "$summary" reconnects) kv_uncertain=$(field "$summary" uncertain)" \
	"kv_acked_sets=$(field "$summary" acked_sets) check=$(field "$out" result)"

# The other stream of the same process (to b's own server) finished intact.
rc=0
out=$("$G" b wait streams --timeout 200) || rc=$?
line2=$(grep '^done id=2 ' <<<"$out" | tail -n 1)
check "the same process's other stream (to b) is unaffected (max stall $(field "$line2" max_gap_ms) ms)" \
	[ "$(field "$line2" result)" = ok ]
check "and only the stream to the dead host failed (exit $rc)" [ "$rc" = 1 ]

start_stream_server a srv2 "rdma://$A:7401?$KA" >/dev/null
out=$("$G" b run --timeout 120 -- "$STREAM" send "rdma://$A:7401?$KA" --bytes 2000000 --timeout 60) || true
check "a new stream to the restarted host works" grep -q '^done .*result=ok' <<<"$out"
finish
