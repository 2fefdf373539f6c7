#!/usr/bin/env bash
# conduit-kv between the hosts over rdma:// through 1% loss each way: a redis-benchmark-
# style load (conduit-kv-bench, as Valkey's clients use the RDMA transport) and a write load
# whose every acknowledged write is then found on the server, on a clean and a lossy link.
# Default keepalive timeout (10 s): see netem_streams.sh for why 3 s is too short at 1% loss.
. "$(dirname "$0")/lib.sh" "$1"

mkdir -p "$WORK/kv"
"$G" a start kv -- "$KV" --port 6390 --bind "$A" --listen "rdma://$A:6391" --appendonly yes \
	--appendfsync everysec --dir "$WORK/kv" --protected-mode no --loglevel warning
wait_for a kv 'ready to accept' 60 >/dev/null
for cond in clean loss-1%; do
	for h in a b; do
		if [[ $cond == clean ]]; then "$G" "$h" net clear; else "$G" "$h" net netem loss 1%; fi
	done
	out=$("$G" b run --timeout 200 -- "$KVBENCH" --url "rdma://$A:6391" -t set,get -n 1000 -c 4 -q) || true
	set_rps=$(grep -E '^SET:' <<<"$out" | grep -oE '[0-9.]+ requests' | cut -d' ' -f1 || true)
	get_rps=$(grep -E '^GET:' <<<"$out" | grep -oE '[0-9.]+ requests' | cut -d' ' -f1 || true)
	say "$cond: conduit-kv-bench SET $set_rps rps, GET $get_rps rps"
	check "$cond: conduit-kv-bench SET and GET over rdma:// complete ($set_rps / $get_rps rps)" \
		[ -n "$set_rps" -a -n "$get_rps" ]
	out=$("$G" b run --timeout 200 -- "$KVCHECK" load "rdma://$A:6391" --log "$WORK/acks-$cond" \
		--prefix "$cond" --count 1000 --timeout 150) || true
	load=$(grep '^load ' <<<"$out" | tail -n 1)
	out=$("$G" b run --timeout 120 -- "$KVCHECK" check "rdma://$A:6391" --log "$WORK/acks-$cond") || true
	say "$cond: $load; $out"
	check "$cond: 1000 SETs acknowledged and every one found ($(field "$load" ops_s) ops/s)" \
		[ "$(field "$load" acked_sets)" = 1000 -a "$(field "$out" result)" = ok ]
	result "condition=$cond kv_bench_set_rps=$set_rps kv_bench_get_rps=$get_rps load_ops_s=$(field "$load" ops_s)" \
		"check=$(field "$out" result)"
done
for h in a b; do "$G" "$h" net clear; done
finish
