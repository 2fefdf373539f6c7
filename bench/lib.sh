# bench/lib.sh: sourced by the benchmark scripts that run inside the Soft-RoCE testbed.
#
# bench_enter_testbed NAME DEFAULT_TIMEOUT SCRIPT [ARGS...]
#   Inside the guest (CONDUIT_IN_TESTBED set) it returns at once.  On the host it makes
#   $results_root absolute, passes it in as CONDUIT_BENCH_RESULTS (it must lie inside the
#   repository, the guest's only writable share), and replaces the shell with
#   testbed/run ... -- bash SCRIPT ARGS.  The guest is killed after
#   $CONDUIT_BENCH_GUEST_TIMEOUT seconds (default DEFAULT_TIMEOUT).  Needs $REPO.
bench_enter_testbed() {
	[[ -n ${CONDUIT_IN_TESTBED:-} ]] && return 0
	local name=$1 timeout=$2 script=$3
	shift 3
	if [[ ! -x $REPO/testbed/run ]]; then
		echo "$name: not inside the testbed, and $REPO/testbed/run is missing" >&2
		exit 2
	fi
	results_root=$(realpath -m -- "$results_root")
	export CONDUIT_BENCH_RESULTS=$results_root
	echo "$name: starting the testbed guest (results under $results_root; host load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	exec "$REPO/testbed/run" --timeout "${CONDUIT_BENCH_GUEST_TIMEOUT:-$timeout}" -- bash "$script" "$@"
}
