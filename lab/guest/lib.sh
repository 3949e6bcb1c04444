# Helpers for lab scenarios (busybox sh); a scenario starts with `. /lab/lib.sh`.
# Sourcing turns on `set -e`: any failing command ends the scenario as failed. Checks print "ok: ..." when
# they pass and "FAIL: ..." (then exit 1) when they do not, so a failed scenario's output says what broke.
# Environment from /init: LAB_MACHINE (pc | q35-iommu | virt | virt-smmuv3), LAB_VFIO (noiommu | type1), LAB_SCALE
# (the host's PCIBENCH_LAB_TIME_SCALE: wait_until's bounds grow with it).
set -e
SYS=/sys/bus/pci/devices

ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# wait_until SECONDS WHAT CMD...: run CMD every 0.1 s until it succeeds; fail naming WHAT once SECONDS (scaled by
# LAB_SCALE, as the host scales its limits under load) have gone by. Waits are on events, never on a sleep that
# assumes how long something takes: the bound only catches what will never happen.
wait_until() {
	_wu_limit=$(($1 * ${LAB_SCALE:-1} * 10)) _wu_what=$2 _wu_i=0
	shift 2
	until "$@"; do
		_wu_i=$((_wu_i + 1))
		[ "$_wu_i" -lt "$_wu_limit" ] || fail "$_wu_what: not within $((_wu_limit / 10)) s"
		sleep 0.1
	done
}

# find_dev VID:DID: print the address (DDDD:BB:DD.F) of the first device with these IDs; fail if none.
find_dev() {
	want=$(echo "$1" | tr A-F a-f)
	for d in "$SYS"/*; do
		if [ "$(cat "$d/vendor"):$(cat "$d/device")" = "0x${want%%:*}:0x${want#*:}" ]; then
			basename "$d"
			return 0
		fi
	done
	fail "no PCI device $1"
}

# bar_start ADDR N: print BAR N's bus address (hex) from the device's sysfs `resource` file.
bar_start() { sed -n "$(($2 + 1))p" "$SYS/$1/resource" | cut -d' ' -f1; }

# driver_of ADDR: print the bound driver's name, or nothing.
driver_of() { if [ -e "$SYS/$1/driver" ]; then basename "$(readlink "$SYS/$1/driver")"; fi; }

# group_of ADDR: print the device's IOMMU group number (a no-IOMMU group too), or nothing.
group_of() { if [ -e "$SYS/$1/iommu_group" ]; then basename "$(readlink "$SYS/$1/iommu_group")"; fi; }

# mem_enable ADDR: make sure the device decodes its memory BARs (command register bit 1). On x86 the firmware
# (SeaBIOS) sets it; the arm64 virt board boots the kernel without firmware, and Linux leaves it off for a device
# no driver has enabled, so sysfs BAR reads return all-ones. The fix is the one `pcibench doctor` recommends.
mem_enable() {
	[ $(($(od -An -tu1 -j4 -N1 "$SYS/$1/config") & 2)) = 0 ] || return 0
	pcibench setup "$1" --sysfs-user root >/dev/null || fail "pcibench setup $1 --sysfs-user root failed"
	[ $(($(od -An -tu1 -j4 -N1 "$SYS/$1/config") & 2)) != 0 ] || fail "$1: Memory Space still disabled after setup"
	ok "$1: Memory Space enabled by pcibench setup --sysfs-user root"
}

# unbind ADDR: detach the device from its driver (if any) and clear driver_override.
unbind() {
	if [ -e "$SYS/$1/driver" ]; then echo "$1" >"$SYS/$1/driver/unbind"; fi
	echo >"$SYS/$1/driver_override"
}

# edu_behind PORT: the address of edu (1234:11e8), which must sit behind the bridge PORT (machine q35-pcie's root
# port, whose secondary bus edu has alone: the scenarios that reset that bus).
edu_behind() {
	_eb=$(find_dev 1234:11e8)
	[ "$(basename "$(dirname "$(readlink -f "$SYS/$_eb")")")" = "$1" ] || fail "edu $_eb is not behind $1"
	echo "$_eb"
}

# readd ADDR: unbound, removed and found again by a rescan, so the kernel assigns its BARs afresh (a scenario that
# reset the function leaves it as the boot did).
readd() {
	unbind "$1" 2>/dev/null || true
	echo 1 >"$SYS/$1/remove"
	echo 1 >/sys/bus/pci/rescan
	[ -e "$SYS/$1" ] || fail "$1 did not come back after a rescan"
}

# bind_vfio ADDR: bind the device to vfio-pci through driver_override + drivers_probe.
bind_vfio() {
	unbind "$1"
	echo vfio-pci >"$SYS/$1/driver_override"
	echo "$1" >/sys/bus/pci/drivers_probe 2>/dev/null || true
	if [ "$(driver_of "$1")" != vfio-pci ]; then
		dmesg | tail -n 5
		fail "bind_vfio $1: not bound to vfio-pci"
	fi
	ok "$1 bound to vfio-pci"
}

# bind_uio ADDR: bind the device to uio_pci_generic (a real kernel driver, loaded from /lib/extra on first use),
# so scenarios can check that pcibench refuses BARs a kernel driver owns.
bind_uio() {
	[ -d /sys/module/uio ] || insmod /lib/extra/uio.ko
	[ -d /sys/module/uio_pci_generic ] || insmod /lib/extra/uio_pci_generic.ko
	unbind "$1"
	echo uio_pci_generic >"$SYS/$1/driver_override"
	echo "$1" >/sys/bus/pci/drivers_probe 2>/dev/null || true
	[ "$(driver_of "$1")" = uio_pci_generic ] || fail "bind_uio $1: not bound to uio_pci_generic"
	ok "$1 bound to uio_pci_generic"
}

# as_user CMD...: run CMD as the unprivileged user `user` (uid/gid 1000, no other groups), arguments intact.
# (busybox su as root asks no password; this busybox's setpriv cannot change uids.)
as_user() { su -s /bin/sh -c 'exec "$0" "$@"' -- user "$@"; }

# expect_fail CMD...: CMD must exit non-zero.
expect_fail() {
	if out=$("$@" 2>&1); then
		printf '%s\n' "$out"
		fail "succeeded but should fail: $*"
	fi
	printf '%s\n' "$out"
	ok "fails as it should: $*"
}

# expect_err PATTERN CMD...: CMD must exit non-zero and its output (stdout+stderr) match the extended regex PATTERN.
expect_err() {
	pat=$1
	shift
	if out=$("$@" 2>&1); then
		printf '%s\n' "$out"
		fail "succeeded but should fail: $*"
	fi
	printf '%s\n' "$out"
	printf '%s\n' "$out" | grep -Eq -- "$pat" || fail "no line matches /$pat/: $*"
	ok "fails as it should, with /$pat/: $*"
}

# expect_rc "RC..." PATTERN CMD...: CMD must exit with one of the statuses RC... and print a line matching PATTERN.
expect_rc() {
	want=$1 pat=$2
	shift 2
	rc=0
	out=$("$@" 2>&1) || rc=$?
	printf '%s\n' "$out"
	case " $want " in *" $rc "*) ;; *) fail "exit status $rc, want $want: $*" ;; esac
	printf '%s\n' "$out" | grep -Eq -- "$pat" || fail "no line matches /$pat/: $*"
	ok "status $rc and /$pat/ in: $*"
}

# expect_out PATTERN CMD...: CMD must succeed and its output (stdout+stderr) match the extended regex PATTERN.
expect_out() {
	pat=$1
	shift
	rc=0
	out=$("$@" 2>&1) || rc=$?
	printf '%s\n' "$out"
	[ "$rc" = 0 ] || fail "exit status $rc: $*"
	printf '%s\n' "$out" | grep -Eq -- "$pat" || fail "no line matches /$pat/: $*"
	ok "/$pat/ in: $*"
}

# emit LABEL CMD...: CMD must succeed; its stdout goes between "@@OUT LABEL" and "@@ENDOUT LABEL" lines, where
# the scenario's host_check finds it with `emitted LABEL` (e.g. JSON to parse with python3 on the host).
emit() {
	label=$1
	shift
	out=$("$@") || fail "exit status $?: $*"
	echo "@@OUT $label"
	printf '%s\n' "$out"
	echo "@@ENDOUT $label"
}

# use_tools: on q35-inuse, mount the tools disk (the NVMe namespace with serial "tools": virtio modules, lspci and
# the in-use scenarios' helpers) read-only on /tools, then source /tools/inuse.sh (lab/guest/inuse.sh).
use_tools() {
	if [ ! -f /tools/inuse.sh ]; then
		i=0
		while [ -z "$(tools_disk)" ] && [ $((i += 1)) -lt 100 ]; do sleep 0.1; done
		[ -n "$(tools_disk)" ] || fail "no NVMe namespace with serial 'tools' (is this q35-inuse?)"
		mkdir -p /tools && mount -o ro "/dev/$(tools_disk | head -n 1)" /tools
	fi
	. /tools/inuse.sh
}
tools_disk() {
	for t in /sys/class/nvme/nvme*; do
		[ -f "$t/serial" ] && [ "$(tr -d " " <"$t/serial")" = tools ] && ls "$t" | grep -E '^nvme[0-9]+n[0-9]+$'
	done
	return 0
}
