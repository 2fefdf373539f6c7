#!/bin/bash
# The job agent of a two-host guest (testbed/twohost). testbed/guest copies it into the
# guest's job dir; the guest's init runs it in the chroot of the host's root, as root,
# with a clean environment. It runs whatever the host asks, until the host asks it to stop.
#
# Protocol (files in the job dir, a 9p share without caching, so both sides see changes
# at once; every file is written under a temporary name and renamed):
#   req/ID.sh        the host's request: a bash script (cd + exec of the command)
#   out/ID/cmd.sh    the request, once taken
#   out/ID/pid       its process id = its process group (it runs in its own session)
#   out/ID/stdout, out/ID/stderr
#   out/ID/status    its exit status, written when it ended
#   agent-ready      written at start (the guest is ready for requests)
#   stop             from the host: stop taking requests and power off
# The agent polls req/ every 0.1 s (bash's read -t on a FIFO: no process per poll).
set -u
JOB=/run/conduit-job
# shellcheck source=/dev/null
. "$JOB/env.sh" || exit 125
mkdir -p "$JOB/out" "$JOB/req" || exit 125
mkfifo /run/conduit-agent.fifo || exit 125
exec 3<>/run/conduit-agent.fifo

start_job() { # ID
	local id=$1 dir=$JOB/out/$1
	mkdir -p "$dir"
	mv "$JOB/req/$id.sh" "$dir/cmd.sh" || return
	(
		# setsid execs (this subshell is not a group leader): $! is the job's pid,
		# and its own process group, so the host can signal the whole job.
		setsid bash "$dir/cmd.sh" </dev/null >"$dir/stdout" 2>"$dir/stderr" &
		echo $! >"$dir/pid.tmp"
		mv "$dir/pid.tmp" "$dir/pid"
		wait $!
		echo $? >"$dir/status.tmp"
		mv "$dir/status.tmp" "$dir/status"
	) &
}

echo "$(cut -d' ' -f1 /proc/uptime)" >"$JOB/agent-ready.tmp"
mv "$JOB/agent-ready.tmp" "$JOB/agent-ready"
shopt -s nullglob
while [[ ! -e $JOB/stop ]]; do
	for req in "$JOB"/req/*.sh; do
		id=${req##*/}
		start_job "${id%.sh}"
	done
	read -r -t 0.1 -u 3 || true
done
# Jobs still running end with the guest.
exit 0
