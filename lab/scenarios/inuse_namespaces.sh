# What only the kernel or another namespace knows is never taken (issue 35): a virtio NIC moved into a network
# namespace made by `unshare --net` (named by its process), then into one kept only by a bind mount under
# /run/netns as `ip netns add` makes it (named by that name), each up with an address; a raw virtio disk exported
# by the kernel's SCSI target (LIO, iblock backstore through configfs, enable 1: no holders/ link, no process, no
# mount; named from configfs); a virtio disk mounted only inside a process's private mount
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
refused "$a3" virtio-pci "LIO \(the kernel's SCSI target\) exports $r3 as backstore iblock_0/lab"
expect_rc 2 "^  then: delete the backstore: targetcli /backstores/block delete lab\$" pcibench doctor "$a3"
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
