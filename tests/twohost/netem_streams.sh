#!/usr/bin/env bash
# rdma:// and auto:// streams from b to a through loss, delay, reordering and duplication
# on the link (netem on both guests' egress): every byte checked, throughput reported.
# The default keepalive timeout (10 s) here, not the fault tests' 3 s: a lost packet at the
# tail of a burst is resent only when the QP's retransmission timer fires (~2-4 s with
# rdma_cm's RoCE default), and 3 s of silence then drops a healthy connection (seen at 1%).
. "$(dirname "$0")/lib.sh" "$1"

rdma_pid=$(start_stream_server a srv-rdma "rdma://$A:7101")
auto_pid=$(start_stream_server a srv-auto "auto://$A:7102")
say "servers up (rdma pid $rdma_pid, auto pid $auto_pid)"

# condition name | netem arguments ("" = clean) | bytes per stream
conditions=(
	"clean||8000000"
	"loss-0.1%|loss 0.1%|8000000"
	"loss-1%|loss 1%|4000000"
	"delay-5ms±2ms|delay 5ms 2ms rate 1gbit|4000000"
	"reorder-2%|delay 2ms reorder 2% 25%|4000000"
	"duplicate-1%|duplicate 1%|4000000"
)
printf '%-16s %-6s %-10s %10s %8s\n' condition url transport MB/s seconds
for c in "${conditions[@]}"; do
	IFS='|' read -r name netem bytes <<<"$c"
	for h in a b; do
		if [[ -n $netem ]]; then
			# shellcheck disable=SC2086 # netem arguments are words
			"$G" "$h" net netem $netem
		else
			"$G" "$h" net clear
		fi
	done
	for scheme in rdma auto; do
		url=$([[ $scheme == rdma ]] && echo "rdma://$A:7101" || echo "auto://$A:7102?rdma_timeout_ms=5000")
		job=c-$name-$scheme
		job=${job//[^A-Za-z0-9_.-]/_}
		"$G" b start "$job" -- "$STREAM" send "$url" --bytes "$bytes" --timeout 60
		rc=0
		out=$("$G" b wait "$job" --timeout 90 2>&1) || rc=$?
		if [[ $rc == 124 ]]; then
			echo "FAIL  $name $scheme://: the client did not end within 90 s (its --timeout is 60 s); its state:"
			failures=$((failures + 1))
			job_state b "$job"
			"$G" b signal "$job" KILL || true
		fi
		conn=$(grep '^connected ' <<<"$out" | tail -n 1)
		done_line=$(grep '^done ' <<<"$out" | tail -n 1)
		printf '%-16s %-6s %-10s %10s %8s\n' "$name" "$scheme" "$(field "$conn" transport)" \
			"$(field "$done_line" mb_s)" "$(field "$done_line" seconds)"
		result "condition=$name url=$scheme transport=$(field "$conn" transport) mb_s=$(field "$done_line" mb_s)" \
			"seconds=$(field "$done_line" seconds) bytes=$bytes"
		check "$name $scheme://: $bytes bytes arrive intact ($(field "$done_line" error))" \
			[ "$(field "$done_line" result)" = ok ]
	done
done
for h in a b; do "$G" "$h" net clear; done

# The servers checked every byte too: each connection ended ok.
for job in srv-rdma srv-auto; do
	"$G" a signal "$job" TERM
	summary=$("$G" a wait "$job" --timeout 30 | grep '^server ' || true)
	check "$job: every stream verified byte for byte on the server ($summary)" \
		[ "$(field "$summary" errors)" = 0 -a "$(field "$summary" ok)" = "${#conditions[@]}" ]
done
# Intact data is also the auto:// rule when it fell back: report which transport it used.
rxe=$("$G" b run --timeout 30 -- rdma statistic show link rxe0/1 2>/dev/null | tr ' ' '\n' | paste - - | grep -E 'completer_retry_err|rcvd_seq_err|duplicate_request|out_of_seq_request' | tr '\n' ' ' || true)
say "b's rxe0 counters after the run: $rxe"
finish
