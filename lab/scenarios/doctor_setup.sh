# doctor and setup on edu: before (free device: sysfs; the user, who cannot check root's processes, the check as root), setup --vfio
# (twice: the second run changes nothing), after (vfio behind an IOMMU, vfio-noiommu on pc and virt; the user is
# told the chown, and without an IOMMU the setcap line), --release (back to no driver, twice), setup through sudo
# (no grant without --user), --vfio --user (the user gets the group node, pio works as that user with an IOMMU,
# --release takes it back: the node's owner checked before and after), then --sysfs-user for the user; then
# --vfio --user for another uid takes that grant back first and the node is not re-owned without --force (issue 36
# M4), and without an IOMMU `dma --buffer heap` is refused unless --force (M5).
# machines: pc q35-iommu virt virt-smmuv3
# timeout: 90
. /lab/lib.sh

# The lockdown check reads /sys/kernel/security/lockdown.
grep -q ' /sys/kernel/security ' /proc/mounts || mount -t securityfs securityfs /sys/kernel/security
a=$(find_dev 1234:11e8)
echo "edu at $a"
[ -z "$(driver_of "$a")" ] || fail "$a is bound to $(driver_of "$a") at boot"
# Leave edu free for the scenarios after this one, whatever happens here.
trap 'pcibench setup "$a" --release >/dev/null 2>&1 || unbind "$a"; chown 0:0 "$SYS/$a"/resource*' EXIT

case $LAB_VFIO in
noiommu) via=vfio-noiommu node_prefix=noiommu- ;;
*) via=vfio node_prefix= ;;
esac

# Before: no driver. Root reaches it through sysfs unless firmware left Memory Space off.
mem=$(od -An -tu1 -j4 -N1 "$SYS/$a/config" | tr -d ' ')
if [ $((mem & 2)) != 0 ]; then
	expect_rc "0 1" '^recommended: sysfs: ready$' pcibench doctor "$a"
else
	expect_rc 2 "^  run: sudo pcibench setup $a --sysfs-user root\$" pcibench doctor "$a"
fi
expect_rc "0 1 2" '^PASS  lockdown +none$' pcibench doctor "$a"
expect_rc 2 '^FAIL  resource-files +user cannot open for read\+write: resource0' as_user pcibench doctor "$a"
# A user cannot read root's processes: the in-use check is incomplete, so nothing that takes the device is
# offered (issue 54), only the check as root.
expect_rc 2 "^  run: sudo pcibench doctor $a\$" as_user pcibench doctor "$a"
offers_nothing() {
	out=$("$@" 2>&1) || true
	if printf '%s\n' "$out" | grep -Eq 'setup .*--vfio|setup .*--sysfs-user|unbind|driver_override|new_id'; then
		printf '%s\n' "$out"
		fail "offers to take the device: $*"
	fi
	ok "offers nothing that takes the device: $*"
}
offers_nothing as_user pcibench doctor "$a"
offers_nothing as_user pcibench doctor "$a" --json
expect_rc 2 '"via": *"none"' as_user pcibench doctor "$a" --json
# A user who cannot open the BAR measures nothing: every configuration is skipped with the reason, exit 4.
expect_rc 4 'Permission denied' as_user pcibench pio "$a" --via sysfs --bar 0 --dir c2h --size 4K --total 64K

# setup --vfio, twice.
expect_out 'bound it to vfio-pci' pcibench setup "$a" --vfio
[ "$(driver_of "$a")" = vfio-pci ] || fail "$a not bound to vfio-pci after setup --vfio"
[ "$(cat "$SYS/$a/driver_override")" = vfio-pci ] || fail "driver_override is $(cat "$SYS/$a/driver_override")"
g=$(group_of "$a")
node=/dev/vfio/$node_prefix$g
[ -c "$node" ] || fail "$node missing (have: $(ls /dev/vfio))"
ok "$a bound to vfio-pci, $node exists"
[ -f "/run/pcibench/$a" ] || fail "setup --vfio left no /run/pcibench/$a"
ok "original driver remembered: $(cat "/run/pcibench/$a")"
expect_out 'nothing to change' pcibench setup "$a" --vfio

# After: root is ready on the VFIO flavour of this machine; the user is told exactly what to run.
expect_rc "0 1" "^recommended: $via: ready\$" pcibench doctor "$a"
# The command it recommends works (reads only). edu's only BAR holds its registers, which PIO leaves
# alone unless named: the bare command says so (exit 4, nothing to measure), naming BAR0 measures it.
expect_rc 4 'holds DMA engine registers \(BAR0\).*--bar 0' pcibench pio "$a" --via "$via"
expect_out "^pcibench pio $a via $via" pcibench pio "$a" --via "$via" --bar 0 --map uc --dir c2h --size 4K --total 64K
expect_rc 2 "^  (run|then): sudo chown user $node\$" as_user pcibench doctor "$a"
if [ "$LAB_VFIO" = noiommu ]; then
	expect_rc 2 '^FAIL  cap-sys-rawio ' as_user pcibench doctor "$a"
	expect_rc 2 '^  (run|then): sudo setcap cap_sys_rawio=ep /.*pcibench$' as_user pcibench doctor "$a"
fi

# --release restores the original state (no driver), twice.
expect_out 'unbound it from vfio-pci' pcibench setup "$a" --release
[ -z "$(driver_of "$a")" ] || fail "$a still bound to $(driver_of "$a") after --release"
[ "$(cat "$SYS/$a/driver_override")" = "(null)" ] || fail "driver_override is $(cat "$SYS/$a/driver_override")"
[ ! -e "/run/pcibench/$a" ] || fail "/run/pcibench/$a left behind"
ok "$a released: no driver, no driver_override"
expect_out 'nothing to change' pcibench setup "$a" --release

# A grant is explicit: without --user the node stays root's, even through sudo (SUDO_USER is not a grant).
expect_out "nobody was given /dev/vfio/$node_prefix[0-9]+: it stays root's" env SUDO_USER=user SUDO_UID=1000 SUDO_GID=1000 pcibench setup "$a" --vfio
node=/dev/vfio/$node_prefix$(group_of "$a")
[ "$(stat -c %u "$node")" = 0 ] || fail "$node given to uid $(stat -c %u "$node") without --user"
expect_out 'unbound it from vfio-pci' pcibench setup "$a" --release
# --user gives that user the group node, with a warning naming what they can then do; --release takes it back.
expect_out "gave user /dev/vfio/$node_prefix[0-9]+ \\(chown 1000:1000\\)" pcibench setup "$a" --vfio --user user
node=/dev/vfio/$node_prefix$(group_of "$a")
[ "$(stat -c %u:%g "$node")" = 1000:1000 ] || fail "$node is $(stat -c %u:%g "$node") after --user user"
ok "$node owned by user after setup --vfio --user user"
if [ "$LAB_VFIO" = noiommu ]; then
	# Every run says the group is no-IOMMU, not only the one that turned the mode on.
	expect_out '/dev/vfio/noiommu-[0-9]+ is a no-IOMMU group' pcibench setup "$a" --vfio --user user
	expect_rc 2 '^recommended: none until you fix cap-sys-rawio \(then vfio-noiommu\)$' as_user pcibench doctor "$a"
else
	expect_rc "0 1" '^recommended: vfio: ready$' as_user pcibench doctor "$a"
	expect_out "^pcibench pio $a via vfio" as_user pcibench pio "$a" --via vfio --bar 0 --map uc --dir c2h --size 4K --total 64K
fi
expect_out "gave $node back to 0:0" pcibench setup "$a" --release
[ ! -e "$node" ] || [ "$(stat -c %u "$node")" = 0 ] || fail "$node still owned by uid $(stat -c %u "$node") after --release"
ok "--release took $node back"

# --sysfs-user: the user reaches it through sysfs.
expect_out 'gave user \(1000:1000\) resource0' pcibench setup "$a" --sysfs-user user
expect_rc "0 1" '^recommended: sysfs: ready$' as_user pcibench doctor "$a"
expect_out "^pcibench pio $a via sysfs" as_user pcibench pio "$a" --via sysfs --bar 0 --map uc --dir c2h --size 4K --total 64K
expect_out 'nothing to change' pcibench setup "$a" --sysfs-user user

# A --sysfs-user grant ends where VFIO begins: --vfio for another user takes resource0 back before binding.
expect_out "took back the --sysfs-user grant first: gave /sys/bus/pci/devices/$a/resource0 back to 0:0" pcibench setup "$a" --vfio --user 1001
[ "$(stat -c %u "$SYS/$a/resource0")" = 0 ] || fail "resource0 is uid $(stat -c %u "$SYS/$a/resource0") after setup --vfio --user 1001"
ok "setup --vfio --user 1001 took user's resource0 back"
node=/dev/vfio/$node_prefix$(group_of "$a")
[ "$(stat -c %u "$node")" = 1001 ] || fail "$node is uid $(stat -c %u "$node") after --user 1001"
# The node is uid 1001's now: handing it to user is refused without --force, and nothing changes.
expect_rc 1 "refusing to give user $node: it belongs to uid 1001" pcibench setup "$a" --vfio --user user
[ "$(stat -c %u "$node")" = 1001 ] || fail "$node re-owned to uid $(stat -c %u "$node") without --force"
ok "$node stays uid 1001's without --force"
if [ "$LAB_VFIO" = noiommu ]; then
	# Without an IOMMU the card gets physical addresses: 4 KiB heap pages (movable) only with --force.
	expect_rc "1 4" 'buffer heap is refused without an IOMMU' pcibench dma "$a" --engine edu --buffer heap --dma-bits 32 --total 8K --allow-dma
	expect_out 'warning: --force --buffer heap' pcibench dma "$a" --engine edu --buffer heap --force --dma-bits 32 --total 8K --allow-dma
fi
expect_out 'unbound it from vfio-pci' pcibench setup "$a" --release
