# An NVMe controller in an NVMe subsystem (CONFIG_NVME_MULTIPATH: the namespace head lives under
# /sys/devices/virtual/nvme-subsystem, not under the PCI function) with its namespace mounted: setup refuses
# and changes nothing, doctor fails in-use and offers nothing that takes it; then --force says what it
# overrides before acting, and --release gives the controller back to nvme, whose filesystem mounts and reads
# again.
# machines: q35-inuse
# timeout: 120
. /lab/lib.sh
use_tools

ctrl=$(nvme_by_serial labsubsys)
a=$(func_of "/sys/class/nvme/$ctrl")
h=$(nvme_head "$ctrl")
[ -n "$h" ] || fail "no namespace head for $ctrl"
echo "NVMe $ctrl at $a ($(driver_of "$a")), namespace head $h -> $(readlink -f "/sys/block/$h")"
case $(readlink -f "/sys/block/$h") in
/sys/devices/virtual/nvme-subsystem/*) ok "$h is a multipath head outside $a's directory" ;;
*) fail "$h is not under /sys/devices/virtual/nvme-subsystem: the scenario needs the multipath layout" ;;
esac
subsys=$(basename "$(dirname "$(readlink -f "/sys/block/$h")")")
path=$(ls "/sys/class/nvme/$ctrl" | grep -E '^nvme[0-9]+c[0-9]+n[0-9]+$' | head -n 1)
echo "subsystem $subsys, per-path node $path under $a"
# 6.1 has no multipath/ links on the head: the inventory finds it through /sys/class/nvme-subsystem.
how="NVMe multipath head in $subsys over controller $ctrl"
trap 'umount /mnt/nvme 2>/dev/null || umount -l /mnt/nvme 2>/dev/null || true; pcibench setup "$a" --release >/dev/null 2>&1 || true' EXIT
mkdir -p /mnt/nvme
mount -t ext4 "/dev/$h" /mnt/nvme
grep -qx "$HELLO" /mnt/nvme/hello.txt || fail "cannot read /mnt/nvme/hello.txt"
ok "ext4 on $h mounted on /mnt/nvme"

expect_err "^pcibench: refusing to unbind $a from nvme: the running system uses it: it backs /mnt/nvme through $h \($how\); free it first \(umount /mnt/nvme\) or choose another device; --force takes it anyway\$" pcibench setup "$a" --vfio
check_unchanged "$a" nvme /mnt/nvme
expect_rc 2 "^FAIL  in-use +in use by the running system: it backs /mnt/nvme through $h \($how\)\$" pcibench doctor "$a"
offers_nothing_that_takes pcibench doctor "$a"
check_unchanged "$a" nvme /mnt/nvme

# --force: what it overrides is said (stderr) before anything changes, and recorded with the changes.
rc=0
out=$(pcibench setup "$a" --vfio --force 2>&1) || rc=$?
printf '%s\n' "$out"
[ "$rc" = 0 ] || fail "setup --vfio --force: exit status $rc"
said="WARNING: $a: --force: went ahead although it backs /mnt/nvme through $h ($how)"
w=$(printf '%s\n' "$out" | grep -nxF "$said" | cut -d: -f1)
u=$(printf '%s\n' "$out" | grep -n "unbound it from nvme" | cut -d: -f1)
[ -n "$w" ] && [ -n "$u" ] && [ "$w" -lt "$u" ] || fail "the override was not said before the unbind"
ok "--force said what it overrode (line $w) before unbinding (line $u)"
[ "$(driver_of "$a")" = vfio-pci ] || fail "$a not bound to vfio-pci after --force"
ok "$a bound to vfio-pci"
umount /mnt/nvme 2>/dev/null || umount -l /mnt/nvme
ok "the dead filesystem is unmounted"

# --release: back to the in-kernel nvme driver; the namespace comes back and its filesystem reads again.
expect_out 'gave it back to nvme' pcibench setup "$a" --release
[ "$(driver_of "$a")" = nvme ] || fail "$a bound to '$(driver_of "$a")' after --release, not nvme"
ok "$a back on nvme"
i=0
while h=$(nvme_head "$(nvme_by_serial labsubsys)") && { [ -z "$h" ] || [ ! -b "/dev/$h" ]; }; do
	i=$((i + 1))
	[ "$i" -lt 100 ] || fail "the namespace did not come back"
	sleep 0.1
done
mount -t ext4 "/dev/$h" /mnt/nvme
grep -qx "$HELLO" /mnt/nvme/hello.txt || fail "/mnt/nvme/hello.txt does not read back after --release"
ok "ext4 on $h mounts and reads again"
expect_rc 2 "^FAIL  in-use +in use by the running system: it backs /mnt/nvme through $h" pcibench doctor "$a"
