# pcibench link and setup --id on a real kernel (issue 56), machine q35-inuse.
# link: the virtio NIC's link is its root port's (QEMU pcie-root-port, x-speed/x-width left at QEMU's default):
# shown without consent and without writing; a retrain of the port (Retrain Link set, Link Training waited for)
# reports Link Status as lspci reads it afterwards and the kernel's current_link_speed of both ends, and the AER
# counters; a target speed the port does not take (QEMU hardwires Link Control 2's Target Link Speed) is refused
# with what it kept, and lspci's LnkCtl2 shows it unchanged; the port above a mounted disk is refused (in use).
# setup --id: the data and swap disks (modern virtio-blk, 1af4:1042, behind root ports) refused while the data disk
# is mounted, both still bound to virtio-pci; with it unmounted, both bound to vfio-pci at once, and the three raw
# disks (1af4:1001) likewise; --release by id gives all five back and the data disk mounts and reads again.
# machines: q35-inuse
# timeout: 240
. /lab/lib.sh
use_tools
inuse_modules

cleanup() {
	umount /mnt/data 2>/dev/null || true
	pcibench setup --id 1af4:1001 --release >/dev/null 2>&1 || true
	pcibench setup --id 1af4:1042 --release >/dev/null 2>&1 || true
}
trap cleanup EXIT

# --- link ---------------------------------------------------------------------------------------------------
c=$(func_of "$(ls -d "$SYS"/*/virtio*/net | head -n 1)")
p=$(basename "$(dirname "$(readlink -f "$SYS/$c")")")
echo "NIC $c behind port $p; lspci LnkCap|LnkSta of $p: $(lnk "$p")"
expect_out "^link of $p \(the port above $c\)$" pcibench link "$c"
expect_out "^  kernel: $p current_link_speed $(cat "$SYS/$p/current_link_speed"), current_link_width $(cat "$SYS/$p/current_link_width")$" pcibench link "$c"
expect_rc 1 "add --allow-retrain to consent" pcibench link "$c" --retrain
out=$(pcibench link "$c" --retrain --allow-retrain) || fail "link --retrain: $out"
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q "^  retrained $p's link (Link Control 0x[0-9a-f]* | Retrain Link 0x0020)$" || fail "no retrain step"
after=$(printf '%s\n' "$out" | sed -n 's/^  after:  Gen\([0-9]\) ([0-9.]* GT\/s) x\([0-9]*\) .*/Gen\1 x\2/p')
sta=$(lnk "$p" | cut -d'|' -f2)
[ -n "$after" ] && [ "$after" = "$sta" ] || fail "pcibench says the link is '$after' after the retrain, lspci LnkSta '$sta'"
ok "after the retrain: $after, as lspci's LnkSta of $p says"
speed=$(cat "$SYS/$p/current_link_speed")
printf '%s\n' "$out" | grep -q "^  kernel: $p current_link_speed $speed," || fail "the kernel's current_link_speed $speed not reported"
printf '%s\n' "$out" | grep -q "^  AER:    " || fail "no AER line"
ok "the kernel reports $p at $speed, as pcibench does"
tls=$(lspci -vv -s "$p" | sed -n 's/.*LnkCtl2:.*Target Link Speed: \([0-9.]*GT\/s\).*/\1/p')
expect_err "^pcibench: $p kept Target Link Speed Gen[0-9] \([0-9.]+ GT/s\) after Gen1 was written to its Link Control 2 \(0x[0-9a-f]{4}\): the port does not let software choose its speed" pcibench link "$c" --speed gen1 --retrain --allow-retrain
[ "$(lspci -vv -s "$p" | sed -n 's/.*LnkCtl2:.*Target Link Speed: \([0-9.]*GT\/s\).*/\1/p')" = "$tls" ] || fail "LnkCtl2 changed"
ok "lspci's LnkCtl2 Target Link Speed of $p is still $tls"
expect_rc 2 "cannot run at Gen6" pcibench link "$c" --speed gen6 --allow-retrain

# The port above a mounted disk: in use.
vd=$(vd_by_serial data)
a=$(func_of "/sys/block/$vd")
dp=$(basename "$(dirname "$(readlink -f "$SYS/$a")")")
mkdir -p /mnt/data
mount -t ext4 "/dev/$vd" /mnt/data
expect_err "^pcibench: refusing to retrain the link of $dp: the running system uses it: .*/mnt/data" pcibench link "$a" --retrain --allow-retrain

# --- setup --id ---------------------------------------------------------------------------------------------
# The disks behind root ports (data, swap) are modern virtio-blk (1af4:1042); the raw ones on the root bus are
# transitional (1af4:1001).
ids=1af4:$(sed 's/^0x//' "$SYS/$a/device")
b=$(func_of "/sys/block/$(vd_by_serial swap)")
raws=""
for s in raw1 raw2 raw3; do raws="$raws $(func_of "/sys/block/$(vd_by_serial "$s")")"; done
echo "data $a and swap $b are $ids; raw disks:$raws"
expect_err "^pcibench: refusing to bind the 2 functions with ids $ids to vfio-pci: the running system uses $a \(it backs /mnt/data through $vd\); nothing was changed" pcibench setup --id "$ids" --vfio
check_unchanged "$b" virtio-pci
check_unchanged "$a" virtio-pci /mnt/data
umount /mnt/data
expect_out "^$b: bound it to vfio-pci \(drivers_probe\)$" pcibench setup --id "$ids" --vfio
expect_out "^$(echo "$raws" | awk '{print $3}'): bound it to vfio-pci \(drivers_probe\)$" pcibench setup --id 1af4:1001 --vfio
for d in $a $b $raws; do
	[ "$(driver_of "$d")" = vfio-pci ] || fail "$d is bound to '$(driver_of "$d")' after setup --id"
	[ -e "/dev/vfio/noiommu-$(group_of "$d")" ] || fail "$d: no group node"
done
ok "setup --id bound all five virtio disks to vfio-pci, two ids at a time"
expect_out "^$a: unbound it from vfio-pci$" pcibench setup --id "$ids" --release
expect_out "^$(echo "$raws" | awk '{print $1}'): unbound it from vfio-pci$" pcibench setup --id 1af4:1001 --release
for d in $a $b $raws; do [ "$(driver_of "$d")" = virtio-pci ] || fail "$d back to '$(driver_of "$d")', not virtio-pci"; done
has_data() { for x in /sys/block/vd*; do [ "$(cat "$x/serial" 2>/dev/null)" = data ] && return 0; done; return 1; }
wait_until 10 "the data disk back on virtio-blk" has_data
vd=$(vd_by_serial data)
wait_until 10 "the data disk's node" test -b "/dev/$vd"
mount -t ext4 "/dev/$vd" /mnt/data
grep -qx "$HELLO" /mnt/data/hello.txt || fail "the data disk does not read back after --release"
ok "--release gave all five back to virtio-pci; the data disk mounts and reads again"
