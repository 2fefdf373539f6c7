# shellcheck shell=bash
# Shared by testbed/run (one guest) and testbed/twohost (two guests): the environment a job
# starts with and the qemu command line every guest shares. Sourced, not run.

# Single-quote a word for sh/bash: ' -> '\''
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# Prints the export lines every guest job starts with: a sane PATH followed by the host's
# own entries, HOME=/tmp, and the host variables passed through (CONDUIT_*, GTEST_*, ...,
# and the names in CONDUIT_TESTBED_PASSENV). The testbed's own facts come after these, so
# they win over passed-through values.
tb_env_exports() {
	local guest_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin d name extra host_path
	IFS=: read -ra host_path <<<"${PATH:-}"
	for d in "${host_path[@]}"; do
		[[ -z $d || :$guest_path: == *":$d:"* ]] || guest_path+=:$d
	done
	printf 'export PATH=%s\n' "$(q "$guest_path")"
	echo 'export HOME=/tmp'
	extra=" ${CONDUIT_TESTBED_PASSENV:-} "
	while read -r name; do
		case $name in
		CONDUIT_* | GTEST_* | CTEST_* | CI | ASAN_OPTIONS | UBSAN_OPTIONS | LSAN_OPTIONS | \
			TSAN_OPTIONS | MSAN_OPTIONS | LANG | LC_* | TZ) ;;
		*) [[ $extra == *" $name "* ]] || continue ;;
		esac
		printf 'export %s=%s\n' "$name" "$(q "${!name}")"
	done < <(compgen -e)
}

# tb_qemu_command CPUS MEM_MB CONSOLE_LOG IMAGES JOB_DIR RW_DIR
# Sets the array `qemu` to the command line every guest shares: TCG, no network device
# (-nic none -nodefaults; a caller may add its own private link), the serial console into
# CONSOLE_LOG, the testbed kernel and initramfs, and the 9p shares hostroot (/, read-only),
# job (JOB_DIR) and rw (RW_DIR, unless it is /).
# -no-reboot + panic=-1: a guest kernel panic ends qemu instead of hanging. The other
# kernel options only buy boot time under TCG (the guest is a throwaway test VM): skip the
# crypto self-tests and the CPU vulnerability mitigations.
tb_qemu_command() {
	local cpus=$1 mem=$2 console=$3 images=$4 job=$5 rw=$6
	local boot_opts="cryptomgr.notests mitigations=off ${CONDUIT_TESTBED_KERNEL_ARGS:-}"
	# shellcheck disable=SC2054 # the commas are qemu option syntax
	qemu=(
		qemu-system-x86_64
		-accel tcg,thread=multi -cpu max -smp "$cpus" -m "$mem"
		-nodefaults -no-user-config -no-reboot -nic none
		-vga none -display none -monitor none
		-serial "file:$console"
		-kernel "$images/kernel" -initrd "$images/initramfs.cpio"
		-append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init $boot_opts"
		-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
		-virtfs "local,path=$job,mount_tag=job,security_model=none,multidevs=remap"
	)
	if [[ $rw != / ]]; then
		qemu+=(-virtfs "local,path=$rw,mount_tag=rw,security_model=none,multidevs=remap")
	fi
}

# The writable share: CONDUIT_TESTBED_RW, else the git top-level of the cwd, else the cwd.
# Prints its real path; fails if it is not a directory.
tb_rw_share() {
	local rw
	rw=${CONDUIT_TESTBED_RW:-$(git rev-parse --show-toplevel 2>/dev/null || pwd -P)}
	rw=$(realpath -e -- "$rw") || { echo "testbed: CONDUIT_TESTBED_RW does not exist: $rw" >&2; return 1; }
	[[ -d $rw ]] || { echo "testbed: writable share is not a directory: $rw" >&2; return 1; }
	printf '%s\n' "$rw"
}

# Strips the terminal escapes SeaBIOS and the kernel write (screen clears) from a console log.
tb_clean_console() { sed -u 's/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g; s/\r$//'; }
