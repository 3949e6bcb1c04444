# The running system's virtio disks and NIC are never taken: a mounted ext4 disk, a swap disk and an interface
# that is up each make setup refuse (non-zero, nothing changed, each holder named) and doctor fail "in-use"
# without offering a command that would take the device; the device stays bound, the filesystem mounted and
# readable, swap active, the interface up. Freed, the device is offered again.
# machines: q35-inuse
# timeout: 120
. /lab/lib.sh
use_tools
inuse_modules

cleanup() {
	swapoff "/dev/$vs" 2>/dev/null || true
	umount /mnt/data 2>/dev/null || true
	[ -z "${n:-}" ] || { ip addr flush dev "$n"; ip link set "$n" down; } 2>/dev/null || true
}
trap cleanup EXIT

# A virtio disk with a mounted ext4 filesystem.
vd=$(vd_by_serial data)
a=$(func_of "/sys/block/$vd")
echo "data disk $vd on $a ($(driver_of "$a"))"
mkdir -p /mnt/data
mount -t ext4 "/dev/$vd" /mnt/data
grep -qx "$HELLO" /mnt/data/hello.txt || fail "cannot read /mnt/data/hello.txt"
ok "ext4 on $vd mounted on /mnt/data"
expect_err "^pcibench: refusing to unbind $a from virtio-pci: the running system uses it: it backs /mnt/data through $vd; free it first \(umount /mnt/data\) or choose another device; --force takes it anyway\$" pcibench setup "$a" --vfio
check_unchanged "$a" virtio-pci /mnt/data
expect_err "^pcibench: refusing to give user the BARs of $a: the running system uses it: it backs /mnt/data through $vd" pcibench setup "$a" --sysfs-user user
check_unchanged "$a" virtio-pci /mnt/data
expect_rc 2 "^FAIL  in-use +in use by the running system: it backs /mnt/data through $vd\$" pcibench doctor "$a"
expect_rc 2 "^recommended: none: the running system uses $a \(it backs /mnt/data through $vd\); pick another device, or free it first" pcibench doctor "$a"
expect_rc 2 '^  then: umount /mnt/data$' pcibench doctor "$a"
expect_rc 2 '"blocked_by": \[' pcibench doctor "$a" --json
offers_nothing_that_takes pcibench doctor "$a"
offers_nothing_that_takes pcibench doctor "$a" --json
expect_err "^pcibench: $a is bound to driver virtio-pci and the running system uses it \(it backs /mnt/data through $vd\): pcibench will not touch its BARs; pick another device$" pcibench pio "$a" --allow-write
check_unchanged "$a" virtio-pci /mnt/data

# A virtio disk used as swap.
vs=$(vd_by_serial swap)
b=$(func_of "/sys/block/$vs")
mkswap "/dev/$vs" >/dev/null
swapon "/dev/$vs"
grep -q "^/dev/$vs " /proc/swaps || fail "swap on $vs not active"
ok "swap on $vs ($b) active"
expect_err "^pcibench: refusing to unbind $b from virtio-pci: the running system uses it: it backs active swap through $vs; free it first \(swapoff /dev/$vs\)" pcibench setup "$b" --vfio
check_unchanged "$b" virtio-pci
grep -q "^/dev/$vs " /proc/swaps || fail "swap on $vs no longer active"
ok "swap on $vs still active"
expect_rc 2 "^FAIL  in-use +in use by the running system: it backs active swap through $vs\$" pcibench doctor "$b"
offers_nothing_that_takes pcibench doctor "$b"

# A virtio NIC that is up, with an address from the documentation range on a hub with no other port.
c=$(func_of "$(ls -d "$SYS"/*/virtio*/net | head -n 1)")
n=$(net_of "$c")
ip link set "$n" up
ip addr add 192.0.2.10/24 dev "$n"
ok "$n ($c) up with 192.0.2.10/24"
expect_err "^pcibench: refusing to unbind $c from virtio-pci: the running system uses it: $n is up with 192.0.2.10/24; free it first \(ip link set $n down\)" pcibench setup "$c" --vfio
check_unchanged "$c" virtio-pci
[ $(($(cat "/sys/class/net/$n/flags") & 1)) = 1 ] || fail "$n is no longer up"
ip addr show dev "$n" | grep -q 'inet 192.0.2.10/24' || fail "$n lost its address"
ok "$n still up with its address"
expect_rc 2 "^FAIL  in-use +in use by the running system: $n is up with 192.0.2.10/24\$" pcibench doctor "$c"
offers_nothing_that_takes pcibench doctor "$c"

# Freed, each is a candidate again (and doctor offers setup once more).
umount /mnt/data
swapoff "/dev/$vs"
ip addr flush dev "$n"
ip link set "$n" down
for d in "$a" "$b" "$c"; do
	expect_rc "1 2" '^PASS  in-use +the running system does not use it' pcibench doctor "$d"
	expect_rc 2 "^  run: sudo pcibench setup $d --vfio\$" pcibench doctor "$d"
done
