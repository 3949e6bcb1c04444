# Helpers for the q35-inuse scenarios (busybox sh). lab/host/inuse.sh puts this file on the machine's tools disk
# (an NVMe namespace, serial "tools") with the virtio modules and lspci; a scenario mounts that disk on /tools
# and sources this after /lab/lib.sh (see inuse_virtio.sh).
TOOLS=/tools
HELLO="pcibench lab: this file lives on the device under test"
# The first line of the raw disks raw1..raw3 is "$RAW rawN" (lab/host/inuse.sh).
RAW="pcibench lab raw disk"

# inuse_modules: load the virtio modules and loop (in their order), mount configfs, and wait for the five virtio
# disks (data, swap, raw1-raw3) and the NIC.
inuse_modules() {
	for m in $(cat "$TOOLS/modules/order"); do
		[ -d "/sys/module/$m" ] || insmod "$TOOLS/modules/$m.ko" || fail "insmod $m"
	done
	# Where a Debian host has it (systemd's sys-kernel-config.mount): pcibench reads the storage targets there.
	grep -q " /sys/kernel/config " /proc/mounts || mount -t configfs none /sys/kernel/config
	i=0
	while [ "$(ls /sys/block | grep -c '^vd')" -lt 5 ] || [ -z "$(ls /sys/class/net | grep -v '^lo$')" ]; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || fail "virtio disks or NIC did not appear: $(ls /sys/block) / $(ls /sys/class/net)"
		sleep 0.1
	done
}

# inuse_modules_extra NAME...: load modules the tools disk carries beyond the common ones (in the order given:
# each after what it depends on), unless loaded.
inuse_modules_extra() {
	for m in "$@"; do
		[ -d "/sys/module/$(echo "$m" | tr - _)" ] || insmod "$TOOLS/modules/$m.ko" || fail "insmod $m"
	done
}

# lspci ARGS...: Debian's lspci with the libraries it loads, from the tools disk.
# With the host's pci.ids (the tools disk's), so names are the host's lspci's.
lspci() { "$TOOLS/lib/ld-linux-x86-64.so.2" --library-path "$TOOLS/lib" "$TOOLS/lspci" -i "$TOOLS/pci.ids" "$@"; }

# func_of SYSFS_PATH: the PCI function (DDDD:BB:DD.F) nearest above a sysfs path.
func_of() {
	readlink -f "$1" | tr / '\n' | grep -E '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$' | tail -n 1
}

# vd_by_serial SERIAL: the virtio disk (vda ...) QEMU gave this serial.
vd_by_serial() {
	for d in /sys/block/vd*; do
		[ "$(cat "$d/serial" 2>/dev/null)" = "$1" ] && basename "$d" && return 0
	done
	fail "no virtio disk with serial $1"
}

# nvme_by_serial SERIAL: the NVMe controller (nvme0 ...) with this serial.
nvme_by_serial() {
	for c in /sys/class/nvme/nvme*; do
		[ "$(tr -d " " <"$c/serial")" = "$1" ] && basename "$c" && return 0
	done
	fail "no NVMe controller with serial $1"
}

# nvme_head CTRL: the namespace block device of controller CTRL in its NVMe subsystem (the multipath head),
# or nothing yet.
nvme_head() {
	for s in /sys/class/nvme-subsystem/*; do
		[ -e "$s/$1" ] && ls "$s" | grep -E '^nvme[0-9]+n[0-9]+$' | head -n 1 && return 0
	done
	return 0
}

# first_line DEV: the first line of block device /dev/DEV (a loop device reads its backing disk's).
first_line() { head -n 1 "/dev/$1"; }

# wait_fd PID FD PATH: wait until process PID has PATH open as descriptor FD.
wait_fd() {
	i=0
	while [ "$(readlink "/proc/$1/fd/$2" 2>/dev/null)" != "$3" ]; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || fail "PID $1 did not open $3 as fd $2"
		sleep 0.05
	done
}

# net_of ADDR: the network interface of a PCI function.
net_of() { ls "$SYS/$1"/virtio*/net 2>/dev/null | head -n 1; }

# check_taken_nothing: after a refusal, the device is as it was: bound to DRIVER, and (given) DIR is mounted
# and FILE reads back as written.  check_unchanged ADDR DRIVER [DIR]
check_unchanged() {
	[ "$(driver_of "$1")" = "$2" ] || fail "$1 is bound to '$(driver_of "$1")', not $2"
	[ "$(cat "$SYS/$1/driver_override")" = "(null)" ] || fail "$1 driver_override is $(cat "$SYS/$1/driver_override")"
	[ ! -e "/run/pcibench/$1" ] || fail "/run/pcibench/$1 written"
	ok "$1 still bound to $2, driver_override untouched"
	if [ -n "${3:-}" ]; then
		grep -q " $3 " /proc/mounts || fail "$3 no longer mounted"
		grep -qx "$HELLO" "$3/hello.txt" || fail "$3/hello.txt does not read back"
		date >"$3/written" && sync && [ -s "$3/written" ] || fail "$3 is not writable"
		ok "$3 still mounted, readable and writable"
	fi
}

# offers_nothing_that_takes CMD...: no line of CMD's output offers to take the device.
offers_nothing_that_takes() {
	out=$("$@" 2>&1) || true
	if printf '%s\n' "$out" | grep -Eq 'setup .*--vfio|unbind|driver_override|drivers_probe|--sysfs-user'; then
		printf '%s\n' "$out"
		fail "offers to take the device: $*"
	fi
	ok "offers nothing that takes the device: $*"
}

# gen SPEED: the PCIe generation of an lspci or sysfs speed (2.5GT/s -> 1 ... 32GT/s -> 5).
gen() {
	case $1 in
	2.5*) echo 1 ;; 5*) echo 2 ;; 8*) echo 3 ;; 16*) echo 4 ;; 32*) echo 5 ;; *) echo "?" ;;
	esac
}

# lnk ADDR: lspci's LnkCap and LnkSta of ADDR as "GenN xW|GenN xW", LnkSta with " (downgraded)" when lspci
# says so (one lspci run: under TCG each costs a few hundred ms).
lnk() {
	v=$(lspci -vv -s "$1" 2>/dev/null)
	for r in Cap Sta; do
		line=$(printf '%s\n' "$v" | grep -m 1 "Lnk$r:")
		speed=$(echo "$line" | sed -n 's/.*Speed \([0-9.]*\)GT\/s.*/\1/p')
		width=$(echo "$line" | sed -n 's/.*Width x\([0-9]*\).*/\1/p')
		down=
		echo "$line" | grep -q downgraded && down=" (downgraded)"
		printf 'Gen%s x%s%s' "$(gen "$speed")" "$width" "$down"
		[ "$r" = Sta ] || printf '|'
	done
	echo
}

# refused ADDR DRIVER PATTERN: setup --vfio and pio --allow-write refuse naming PATTERN (right after "uses it: ":
# start it with .* where other users may come first), nothing changes, doctor fails in-use with it and offers
# nothing that takes the device, in text or JSON.
refused() {
	expect_err "^pcibench: refusing to unbind $1 from $2: the running system uses it: $3" pcibench setup "$1" --vfio
	check_unchanged "$1" "$2"
	expect_err "^pcibench: $1 is bound to driver $2 and the running system uses it \($3" pcibench pio "$1" --allow-write
	check_unchanged "$1" "$2"
	expect_rc 2 "^FAIL  in-use +in use by the running system: $3" pcibench doctor "$1"
	offers_nothing_that_takes pcibench doctor "$1"
	offers_nothing_that_takes pcibench doctor "$1" --json
}

# offered ADDR: doctor passes in-use and recommends setup again (once the kernel has finished tearing the holder
# down: a namespace's last reference is dropped by its last process or unmount, its contents after).
offered() {
	i=0
	until pcibench doctor "$1" 2>&1 | grep -q '^PASS  in-use'; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || break
		sleep 0.05
	done
	expect_rc "1 2" '^PASS  in-use +the running system does not use it' pcibench doctor "$1"
	expect_rc 2 "^  run: sudo pcibench setup $1 --vfio\$" pcibench doctor "$1"
}

# wait_comm PID NAME: wait until process PID runs NAME (busybox unshare and nsenter exec it).
wait_comm() {
	i=0
	while [ "$(cat "/proc/$1/comm" 2>/dev/null)" != "$2" ]; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || fail "PID $1 is not running $2"
		sleep 0.05
	done
}

# back_here ADDR: wait until the function's interface is in this namespace again (a namespace is torn down by a
# kernel worker after its last reference goes, net/core/net_namespace.c cleanup_net).
back_here() {
	i=0
	while [ -z "$(net_of "$1")" ]; do
		i=$((i + 1))
		[ "$i" -lt 200 ] || fail "the interface of $1 did not come back to this namespace"
		sleep 0.05
	done
	ok "$(net_of "$1") is back in this namespace"
}
