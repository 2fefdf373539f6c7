#!/usr/bin/env bash
# Host b (the clients) dies mid-stream: SIGKILL of its qemu, no FIN, no DREQ.  On the
# surviving server host a: the stream server's connection from b fails within the bound
# while its connection from a itself streams on untouched; conduit-kv (appendfsync always)
# has every write b saw acknowledged, in memory and in its AOF; QPs and MRs of the dead
# connections are released.  Then b boots again and new connections work.
. "$(dirname "$0")/lib.sh" "$1"

pid=$(start_stream_server a srv "rdma://$A:7301?$KA")
mkdir -p "$WORK/kv"
"$G" a start kv -- "$KV" --port 6390 --bind "$A" --listen "rdma://$A:6391?$KA" --appendonly yes \
	--appendfsync always --dir "$WORK/kv" --protected-mode no --loglevel warning
wait_for a kv 'ready to accept' 60 >/dev/null
kv_pid=$("$G" a pid kv)

# On a: a local stream through the same server (loopback over rxe0), long enough to
# outlast the fault.  On b: a stream and a kv write load, both to a.
"$G" a start local -- "$STREAM" send "rdma://$A:7301?$KA" --bytes 30000000 --rate 1000000 --timeout 120
"$G" b start remote -- "$STREAM" send "rdma://$A:7301?$KA" --bytes 200000000 --rate 1000000 --timeout 300
"$G" b start load -- "$KVCHECK" load "rdma://$A:6391?$KA" --log "$WORK/acks-b" --prefix b --count 10000000 \
	--timeout 300
wait_for a local '^progress ' 60 >/dev/null
wait_for b remote '^progress ' 60 >/dev/null
wait_acks "$WORK/acks-b" 300 90 || fail "the kv load got no 300 acknowledgements within 90 s"
qp_kv=$(qp_count a "$kv_pid")
mr_srv=$(mr_count a "$pid")
say "b streams and writes ($(acks "$WORK/acks-b") SETs acknowledged); server QPs: $(qp_count a "$pid"), kv QPs: $qp_kv"

say "killing b"
"$G" b kill
killed=$EPOCHREALTIME
acked=$(acks "$WORK/acks-b")
check "b had $acked SETs acknowledged when it died (at least 300)" le 300 "$acked"
sline=$(wait_for a srv '^done id=2 ' 30) || true  # id 1 is the local stream
seen=$(ms_since "$killed")
say "server: $sline"
stall=$(field "$sline" stall_ms)
check "the server's connection from the dead host fails within ${DETECT_BOUND_MS} ms (stall ${stall} ms: $(field "$sline" error))" \
	le "$stall" "$DETECT_BOUND_MS"
result "fault=client-host-killed side=server detect_ms=$stall seen_by_host_ms=$seen error=\"$(field "$sline" error)\""

# The other connection on the same server, from a itself, carries on to the end.
rc=0
out=$("$G" a wait local --timeout 120) || rc=$?
line=$(grep '^done ' <<<"$out" | tail -n 1)
check "the server's other connection (from a) finishes intact (max stall $(field "$line" max_gap_ms) ms)" \
	[ "$rc" = 0 -a "$(field "$line" result)" = ok ]

# kv: the server drops the dead client too, and every acknowledged write is there.
deadline=$((SECONDS + 20))
while (($(qp_count a "$kv_pid") > 0 && SECONDS < deadline)); do sleep 0.5; done
check "conduit-kv released the dead client's QP ($(qp_count a "$kv_pid") left, $qp_kv before)" [ "$(qp_count a "$kv_pid")" = 0 ]
[[ $(qp_count a "$kv_pid") == 0 ]] || job_state a kv
out=$("$G" a run --timeout 120 -- "$KVCHECK" check "rdma://$A:6391" --log "$WORK/acks-b" --unlogged 8) || true
say "live server: $out"
# Evidence for a failed connect to a server on a: the client's last lines and the server's threads.
kv_evidence() {
	tail -n 5 <<<"$out" | sed 's/^/    client | /'
	job_state a kv
}
srv_evidence() {
	tail -n 5 <<<"$out" | sed 's/^/    client | /'
	"$G" a output srv 2>&1 | tail -n 8 | sed 's/^/    a:srv | /'
	job_state a srv
	"$G" a run --timeout 30 -- rdma resource show cm_id 2>&1 | sed 's/^/    a:cm_id | /' || true
}
check_else kv_evidence "the live server has every acknowledged write ($acked+ SETs)" grep -q 'result=ok' <<<"$out"
# The AOF alone: load a copy into a fresh conduit-kv on the host and look again.
cp -r "$WORK/kv" "$WORK/kv-copy"
"$KV" --port 0 --bind 127.0.0.1 --appendonly yes --dir "$WORK/kv-copy" --loglevel warning 2>"$WORK/replay.log" &
replay=$!
deadline=$((SECONDS + 30))
until grep -q 'ready to accept' "$WORK/replay.log" || ((SECONDS > deadline)); do sleep 0.2; done
url=$(grep -o 'tcp://127.0.0.1:[0-9]*' "$WORK/replay.log" | head -n 1)
out=$("$KVCHECK" check "$url" --log "$WORK/acks-b" --unlogged 8) || true
kill "$replay" 2>/dev/null || true
wait "$replay" 2>/dev/null || true
say "AOF replay: $out"
check "the surviving server's AOF holds every acknowledged write" grep -q 'result=ok' <<<"$out"

# Resources on the stream server: only what is still open.
sleep 1
check "the stream server holds no QP of the dead host's connection ($(qp_count a "$pid") RC QPs)" [ "$(qp_count a "$pid")" = 0 ]
check "and no more MRs than while connected ($(mr_count a "$pid") now, $mr_srv then)" le "$(mr_count a "$pid")" "$mr_srv"

# b comes back (same address, new kernel, new rxe0): new connections work.
start=$SECONDS
"$G" b boot
say "b booted again in $((SECONDS - start)) s"
out=$("$G" b run --timeout 120 -- "$STREAM" send "rdma://$A:7301?$KA" --bytes 2000000 --timeout 60) || true
check_else srv_evidence "a new stream from the restarted host works" grep -q '^done .*result=ok' <<<"$out"
out=$("$G" b run --timeout 120 -- "$KVCHECK" check "rdma://$A:6391" --log "$WORK/acks-b" --unlogged 8) || true
check_else kv_evidence "a new kv connection from the restarted host reads every acknowledged write" \
	grep -q 'result=ok' <<<"$out"
finish
