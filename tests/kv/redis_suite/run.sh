#!/usr/bin/env bash
# Runs Redis 7.0's own TCL test suite (Debian's source package of the installed
# redis-server, fetched by fetch.sh) against conduit-kv and, in the same run, against
# redis-server with the same harness and flags, one fresh server per file.
#
#   tests/kv/redis_suite/run.sh --kv build/tools/kv/conduit-kv [--redis /usr/bin/redis-server]
#                                [--work DIR] [--files "unit/type/incr unit/expire"] [--check]
#
# Files run in external-server mode (./runtest --host --port --single FILE) with
# --tags -needs:debug ... and --ignore-encoding --ignore-digest; unit/auth and unit/acl, whose
# tests are tagged external:skip, run the way the harness starts its own server, with conduit-kv
# (or redis-server) standing in for src/redis-server.  skip.txt lists every skipped test
# with its reason.  Prints one line per file: passed/run for conduit-kv and redis-server.
# --check: exit 1 when conduit-kv passes fewer tests in a file than floor.txt records
# (a regression), or a file did not finish; exit 77 (ctest: skipped) without tclsh or the
# suite's source -- exit 1 instead when CI is set or CONDUIT_REQUIRE_REDIS_SUITE=1
# (scripts/install-deps.sh installs both), so a required run cannot pass by skipping.
# Each file is bounded by --file-timeout seconds (default 240).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kv_bin="" redis_bin="" work="" check=0 file_timeout=240
# Files whose tests are tagged external:skip: the harness starts the server itself.
own_server_files="unit/auth unit/acl unit/maxmemory unit/info"
files="unit/type/string unit/type/incr unit/type/list unit/type/hash unit/type/set unit/type/zset unit/type/stream-cgroups unit/sort
       unit/keyspace unit/expire unit/protocol unit/info-command unit/introspection unit/querybuf unit/other unit/auth
       unit/multi unit/pubsub unit/tracking unit/bitops unit/bitfield unit/scan unit/latency-monitor unit/acl"
while [[ $# -gt 0 ]]; do
  case $1 in
    --kv) kv_bin=$2; shift 2 ;;
    --redis) redis_bin=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --file-timeout) file_timeout=$2; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "redis_suite: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x $kv_bin ]] || { echo "redis_suite: --kv must name the conduit-kv binary" >&2; exit 2; }
kv_bin=$(cd "$(dirname "$kv_bin")" && pwd)/$(basename "$kv_bin")
# Missing tools: skipped (77), or a failure when the suite is required.
missing() {
  if [[ -n ${CI:-} || ${CONDUIT_REQUIRE_REDIS_SUITE:-} == 1 ]]; then
    echo "redis_suite: $1: FAILED (required: CI or CONDUIT_REQUIRE_REDIS_SUITE=1 is set; run scripts/install-deps.sh)" >&2
    exit 1
  fi
  echo "redis_suite: $1 (scripts/install-deps.sh installs it): skipped" >&2
  exit 77
}
command -v tclsh > /dev/null || missing "tclsh not installed (apt-get install tcl)"
tree=$("$here/fetch.sh") || missing "Redis' test suite is not available (fetch.sh)"

work=${work:-$(mktemp -d /tmp/conduit-redis-suite.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)

# A free loopback port (the harness needs a fixed one for external mode).
free_port() {
  tclsh <<'EOF'
set s [socket -server {apply {{c a p} {close $c}}} -myaddr 127.0.0.1 0]
puts [lindex [fconfigure $s -sockname] 2]
close $s
EOF
}

# Strips the harness' colours and counts its result lines.
count() {  # count FILE KIND
  sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -c "^\[$2\]:" || true
}

# One file against one server; prints "passed run note".
run_file() {  # run_file NAME BIN FILE
  local name=$1 bin=$2 file=$3 dir=$work/$1 log out pid port note=""
  # A private copy of the harness per server: it writes tests/tmp, and src/redis-server is
  # the server the harness starts itself (unit/auth).
  if [[ ! -d $dir/tests ]]; then
    mkdir -p "$dir/src"
    cp -r "$tree/tests" "$dir/"
    ln -sf "$bin" "$dir/src/redis-server"
    command -v redis-cli > /dev/null && ln -sf "$(command -v redis-cli)" "$dir/src/redis-cli"
    command -v redis-benchmark > /dev/null && ln -sf "$(command -v redis-benchmark)" "$dir/src/redis-benchmark"
  fi
  log=$work/$name-${file//\//_}.log
  # The harness' own ports (its test server at baseport-32.., servers it spawns from
  # baseport) default to fixed numbers: another run at the same time (a developer's, or
  # another checkout's) would collide, so each file gets a random range of its own.
  local base=$((22000 + (RANDOM % 38) * 256))  # below the ephemeral range (32768..)
  local args=(--single "$file" --tags -needs:debug --tags -needs:repl --tags -needs:save --tags -needs:pfdebug
              --ignore-encoding --ignore-digest --skipfile "$here/skip.txt" --timeout 60 --clients 1
              --baseport "$base" --portcount 200)
  if [[ " $own_server_files " == *" $file "* ]]; then
    (cd "$dir" && timeout -k 5 "$file_timeout" tclsh tests/test_helper.tcl "${args[@]}" > "$log" 2>&1)
    [[ $? -eq 124 ]] && note="timeout"
  else
    port=$(free_port)
    if [[ $name == kv ]]; then
      "$bin" --port "$port" --bind 127.0.0.1 > "$work/$name-server-${file//\//_}.log" 2>&1 &
    else
      "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --enable-debug-command no \
        > "$work/$name-server-${file//\//_}.log" 2>&1 &
    fi
    pid=$!
    for _ in $(seq 100); do
      (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && break
      sleep 0.1
    done
    (cd "$dir" && timeout -k 5 "$file_timeout" tclsh tests/test_helper.tcl --host 127.0.0.1 --port "$port" "${args[@]}" \
      > "$log" 2>&1)
    [[ $? -eq 124 ]] && note="timeout"
    kill -0 "$pid" 2> /dev/null || note="${note:+$note,}server died"
    kill "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
  fi
  local ok err exc
  ok=$(count "$log" ok)
  err=$(count "$log" err)
  exc=$(count "$log" exception)
  # A test over --timeout stops the file too ([TIMEOUT]); it counts as failed.
  exc=$((exc + $(count "$log" TIMEOUT)))
  [[ $exc -gt 0 ]] && note="${note:+$note,}exception or timeout (the rest of the file did not run)"
  grep -q "All tests passed\|The End" "$log" || [[ -n $note ]] || note="did not finish"
  echo "$ok $((ok + err + exc)) ${note:--}"
}

printf '%-22s %-16s %-16s %s\n' file conduit-kv redis-server note
status=0
total_kv=0 total_kv_run=0 total_r=0 total_r_run=0
for f in $files; do
  read -r kok krun knote < <(run_file kv "$kv_bin" "$f")
  rcell="-" rok=0 rrun=0
  if [[ -n $redis_bin ]]; then
    read -r rok rrun _ < <(run_file redis "$redis_bin" "$f")
    rcell="$rok/$rrun"
  fi
  total_kv=$((total_kv + kok)) total_kv_run=$((total_kv_run + krun)) total_r=$((total_r + rok)) total_r_run=$((total_r_run + rrun))
  printf '%-22s %-16s %-16s %s\n' "$f" "$kok/$krun" "$rcell" "$knote"
  if [[ $check -eq 1 ]]; then
    floor=$(awk -v f="$f" '$1 == f { print $2 }' "$here/floor.txt")
    if [[ -z $floor ]]; then
      echo "redis_suite: $f has no floor in floor.txt" >&2; status=1
    elif [[ $kok -lt $floor ]]; then
      echo "redis_suite: REGRESSION $f: conduit-kv passed $kok, floor.txt records $floor (log: $work/kv-${f//\//_}.log)" >&2
      status=1
    fi
    [[ $knote == *timeout* || $knote == *died* || $knote == "did not finish" ]] && status=1
  fi
done
printf '%-22s %-16s %-16s\n' total "$total_kv/$total_kv_run" "$total_r/$total_r_run"
# Every test of conduit-kv's run that did not run, by name, with the harness' reason: denied
# by a tag ([ignore]) or by skip.txt and the harness' own checks ([skip]).  docs/
# KV-REDIS-SUITE.md's "Every test not run" table is this file from a run of every file.
{
  echo "| file | test | not run because |"
  echo "|---|---|---|"
  for f in $files; do
    log=$work/kv-${f//\//_}.log
    [[ -f $log ]] || continue
    # "[skip]: NAME" (skip.txt, --skiptest); "[ignore]: NAME: REASON" (REASON as "Tag: x denied").
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -a '^\[\(ignore\|skip\)\]: ' |
      awk -v f="$f" '{
        kind = substr($0, 2, index($0, "]") - 2); rest = substr($0, index($0, "]: ") + 3)
        t = rest; r = "skip.txt (reason there)"
        if (rest == "Not supported on external server" || rest ~ /^Tag: /) {
          # a whole start_server block, skipped before its tests are named
          t = "(a block of tests, not named by the harness)"; r = rest " (the block is tagged so)"
        } else if (kind == "ignore") {
          n = index(rest, ": Tag: ")
          if (!n) { n = length(rest); while (n > 0 && substr(rest, n, 2) != ": ") n-- }
          if (n > 0) { t = substr(rest, 1, n - 1); r = substr(rest, n + 2) }
        }
        gsub(/\|/, "\\|", t); gsub(/\|/, "\\|", r); print "| " f " | " t " | " r " |" }'
  done
} > "$work/not-run.md"
echo "not run (by name, with the reason): $work/not-run.md ($(($(wc -l < "$work/not-run.md") - 2)) entries)"
echo "logs: $work"
exit $status
