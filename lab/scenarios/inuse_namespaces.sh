# What only the kernel or another namespace knows is never taken (issue 35): a virtio NIC moved into a network
# namespace made by `unshare --net` (named by its process), then into one kept only by a bind mount under
# /run/netns as `ip netns add` makes it (named by that name), each up with an address; a raw virtio disk exported
# by the kernel's SCSI target (LIO, iblock backstore through configfs, enable 1: held exclusively from inside the
# kernel, no holders/ link, no process, no mount); a virtio disk mounted only inside a process's private mount
# namespace while another virtio disk is mounted here (so virtio_blk's module references cannot tell which disk
# is held). For each: doctor fails in-use offering nothing that takes it, setup --vfio refuses and changes
# nothing, pio --allow-write refuses, the holder still works; released, the device is offered again.
# machines: q35-inuse
# timeout: 180
. /lab/lib.sh
use_tools
inuse_modules

LIO=/sys/kernel/config/target/core/iblock_0/lab
cleanup() {
	[ -z "${np:-}" ] || kill "$np" 2>/dev/null || true
	[ -z "${mp:-}" ] || kill "$mp" 2>/dev/null || true
	umount /run/netns/blue 2>/dev/null || true
	[ ! -d "$LIO" ] || rmdir "$LIO" 2>/dev/null || true
	umount /mnt/data 2>/dev/null || true
}
trap cleanup EXIT

# refused ADDR DRIVER PATTERN: setup --vfio and pio --allow-write refuse naming PATTERN, nothing changes, doctor
# fails in-use with it and offers nothing that takes the device.
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

# 1. A NIC in a network namespace of a process (unshare --net), up with an address.
c=$(func_of "$(ls -d "$SYS"/*/virtio*/net | head -n 1)")
n=$(net_of "$c")
[ -n "$n" ] || fail "no interface on $c"
unshare --net sleep 1000 &
np=$!
wait_comm "$np" sleep
ip link set "$n" netns "$np" || fail "ip link set $n netns $np"
nsenter -t "$np" -n ip link set "$n" up
nsenter -t "$np" -n ip addr add 192.0.2.20/24 dev "$n"
[ -z "$(net_of "$c")" ] || fail "$n still shows in this namespace"
ok "$n ($c) up with 192.0.2.20/24 in the network namespace of PID $np; $c's net/ is empty here"
comm=$(cat "/proc/$np/comm")
refused "$c" virtio-pci "$n is up with 192\.0\.2\.20/24 in the network namespace of PID $np \($comm\)"
expect_rc 2 "^  then: nsenter -t $np -n ip link set $n down\$" pcibench doctor "$c"
nsenter -t "$np" -n ip addr show dev "$n" | grep -q "inet 192.0.2.20/24" || fail "$n lost its address"
nsenter -t "$np" -n ip link show dev "$n" | grep -q "UP" || fail "$n is no longer up"
ok "$n still up with its address in PID $np's namespace"
kill "$np"
wait "$np" 2>/dev/null || true
np=
back_here "$c"
offered "$c"

# 2. The same NIC in a namespace only a bind mount keeps (what `ip netns add blue` makes).
mkdir -p /run/netns
touch /run/netns/blue
unshare --net=/run/netns/blue true || fail "unshare --net=/run/netns/blue"
nsenter -n/run/netns/blue sleep 1000 &
np=$!
wait_comm "$np" sleep
ip link set "$n" netns "$np" || fail "ip link set $n netns $np"
kill "$np"
wait "$np" 2>/dev/null || true
np=
nsenter -n/run/netns/blue ip link set "$n" up
nsenter -n/run/netns/blue ip addr add 192.0.2.21/24 dev "$n"
ok "$n up with 192.0.2.21/24 in namespace blue, which no process is in"
refused "$c" virtio-pci "$n is up with 192\.0\.2\.21/24 in network namespace blue \(ip netns\)"
expect_rc 2 "^  then: ip -n blue link set $n down\$" pcibench doctor "$c"
nsenter -n/run/netns/blue ip addr show dev "$n" | grep -q "inet 192.0.2.21/24" || fail "$n lost its address"
ok "$n still up with its address in blue"
umount /run/netns/blue
rm -f /run/netns/blue
back_here "$c"
offered "$c"

# 3. A raw disk exported by LIO's iblock backstore.
r3=$(vd_by_serial raw3)
a3=$(func_of "/sys/block/$r3")
grep -q " /sys/kernel/config " /proc/mounts || mount -t configfs none /sys/kernel/config
mkdir -p "$LIO"
echo "udev_path=/dev/$r3" >"$LIO/control"
echo 1 >"$LIO/enable"
[ "$(cat "$LIO/enable")" = 1 ] || fail "LIO did not enable iblock_0/lab"
[ -z "$(ls "/sys/block/$r3/holders")" ] || fail "LIO made a holders/ link on $r3: this tests nothing new"
ok "$r3 ($a3) exported by LIO (iblock_0/lab enabled), no holders/ link"
refused "$a3" virtio-pci "$r3 is held exclusively by the kernel \(a mount in another namespace, a storage target export, \.\.\.\)"
cat "$LIO/info"
grep -q "/dev/$r3" "$LIO/info" || fail "LIO's backstore no longer names /dev/$r3"
[ "$(cat "$LIO/enable")" = 1 ] || fail "LIO's backstore was disabled"
ok "LIO still exports /dev/$r3"
rmdir "$LIO"
offered "$a3"

# 4. A disk mounted only in a private mount namespace, with another virtio disk mounted here.
vd=$(vd_by_serial data)
mkdir -p /mnt/data /mnt/priv
mount -t ext4 "/dev/$vd" /mnt/data
vs=$(vd_by_serial swap)
b=$(func_of "/sys/block/$vs")
mke2fs -q "/dev/$vs" || fail "mke2fs /dev/$vs"
unshare -m --propagation private sh -c "mount /dev/$vs /mnt/priv && echo private >/mnt/priv/said && exec sleep 1000" &
mp=$!
i=0
while ! nsenter -t "$mp" -m cat /mnt/priv/said >/dev/null 2>&1; do
	i=$((i + 1))
	[ "$i" -lt 100 ] || fail "$vs was not mounted in PID $mp's namespace"
	sleep 0.05
done
wait_comm "$mp" sleep
grep -q " /mnt/priv " /proc/mounts && fail "/mnt/priv is mounted here too: this tests nothing new"
ok "$vs ($b) mounted on /mnt/priv only in PID $mp's mount namespace; $vd mounted on /mnt/data here"
comm=$(cat "/proc/$mp/comm")
refused "$b" virtio-pci "it backs /mnt/priv in the mount namespace of PID $mp \($comm\) through $vs"
expect_rc 2 "^  then: nsenter -t $mp -m umount /mnt/priv\$" pcibench doctor "$b"
[ "$(nsenter -t "$mp" -m cat /mnt/priv/said)" = private ] || fail "the private mount no longer reads back"
ok "the private mount still reads back"
kill "$mp"
wait "$mp" 2>/dev/null || true
mp=
offered "$b"
