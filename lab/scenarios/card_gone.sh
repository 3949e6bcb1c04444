# A card that stops answering mid-run, on a real kernel (issue 37): while `pio` runs on ivshmem BAR2 over sysfs,
# another process clears the device's Memory Space Enable (command register bit 1, as `setpci COMMAND=...` would)
# through the device's sysfs config file. pcibench stops within a sample with the one line naming the card as no
# longer answering, the upstream port's state and `pcibench health ADDR`, exit 1, the rows measured before kept.
# The hand-off is event-driven: the helper waits until pcibench has mapped BAR2 (its /proc/PID/maps names
# resource2), so the run has begun; the run is sized (--total) to last far longer than the hand-off.
# Then the same through VFIO (vfio-pci bound: type1 on q35-iommu, no-IOMMU on pc), the case the MMIO fault guard is
# for: a kernel that withdraws the mapping answers the next load with SIGBUS, which used to end pcibench with exit
# 135; the run must end with exit 1 and the one line, whichever of the fault guard and the check between samples
# sees it first. `health --state` kept before the sysfs run names the change after it. (Through VFIO the kernel
# puts the command register back when pcibench closes the device: vfio_pci_core_disable restores the state saved
# at open, so there is no change left for health to see.) Last, the SIGBUS for real: a driver claiming the BAR
# revokes the sysfs mapping under a running pio, and the fault guard names it (exit 1, not 135).
# machines: pc q35-iommu
# timeout: 240
. /lab/lib.sh
a=$(find_dev 1af4:1110)
trap 'unbind "$a"; mem_enable "$a"; rm -f /tmp/cg.state' EXIT
unbind "$a"
mem_enable "$a"
cmd_byte() { od -An -tu1 -j4 -N1 "$SYS/$a/config" | tr -d ' '; }

json=/tmp/card_gone.json
expect_rc "0 1 2" "$a" pcibench health "$a" --state /tmp/cg.state
pcibench pio "$a" --bar 2 --map uc --width 64 --dir c2h --size 64K --total 64G --json >"$json" 2>/tmp/card_gone.err &
pid=$!
# Event: the measuring process holds BAR2 mapped (resource2 in its maps). Polling a condition, not a fixed sleep.
i=0
until grep -q "$a/resource2" "/proc/$pid/maps" 2>/dev/null; do
	kill -0 "$pid" 2>/dev/null || { cat /tmp/card_gone.err; fail "pcibench ended before it mapped BAR2"; }
	i=$((i + 1))
	[ $i -lt 100000 ] || fail "pcibench never mapped BAR2"
done
ok "pcibench $pid has BAR2 mapped: clearing Memory Space Enable"
before=$(cmd_byte)
printf "\\$(printf %03o $((before & ~2)))" | dd of="$SYS/$a/config" bs=1 seek=4 count=1 conv=notrunc 2>/dev/null
[ $(($(cmd_byte) & 2)) = 0 ] || fail "Memory Space Enable still set after the config write"
rc=0
wait "$pid" || rc=$?
cat /tmp/card_gone.err
[ "$rc" = 1 ] || fail "pcibench exit status $rc, want 1"
grep -Eq "^pcibench: 0000:$a no longer answers \(surprise removal, link down, or a reset\): its Memory Space Enable was cleared.*run \`pcibench health $a\`" /tmp/card_gone.err \
	|| grep -Eq "^pcibench: $a no longer answers \(surprise removal, link down, or a reset\): its Memory Space Enable was cleared.*run \`pcibench health $a\`" /tmp/card_gone.err \
	|| fail "no card-gone line on stderr"
ok "the card named as no longer answering, exit 1"
grep -q '"gone": ' "$json" || fail "the JSON report has no gone line"
ok "the JSON report keeps its rows and the gone line"
# Afterwards, health names the change since the state kept before the run, and shows the command register.
expect_rc 2 "FAIL  Memory Space Enable of (0000:)?$a was cleared \(command register" pcibench health "$a" --state /tmp/cg.state
expect_rc "0 1 2" "Mem- BusMaster" pcibench health "$a"

# Through VFIO, with Memory Space cleared by another process while pcibench reads BAR2 through the VFIO mapping.
mem_enable "$a"
bind_vfio "$a"
via=vfio
[ "$LAB_VFIO" = noiommu ] && via=vfio-noiommu
pcibench pio "$a" --via "$via" --bar 2 --width 64 --dir c2h --size 64K --total 64G --json >"$json" 2>/tmp/card_gone.err &
pid=$!
# Event: the VFIO device's BAR is mapped into the process (a vfio-device line in its maps).
mapped() {
	kill -0 "$pid" 2>/dev/null || { cat /tmp/card_gone.err; fail "pcibench ended before it mapped BAR2 through VFIO"; }
	grep -q vfio-device "/proc/$pid/maps" 2>/dev/null
}
wait_until 60 "pcibench mapping BAR2 through VFIO" mapped
ok "pcibench $pid has BAR2 mapped through VFIO: clearing Memory Space Enable"
before=$(cmd_byte)
# Not read back: pcibench may stop at once, and closing the device puts the saved command register back.
printf "\\$(printf %03o $((before & ~2)))" | dd of="$SYS/$a/config" bs=1 seek=4 count=1 conv=notrunc 2>/dev/null
rc=0
wait "$pid" || rc=$?
cat /tmp/card_gone.err
[ "$rc" != 135 ] || fail "pcibench died of SIGBUS (exit 135)"
[ "$rc" = 1 ] || fail "pcibench exit status $rc, want 1"
grep -Eq "^pcibench: (0000:)?$a no longer answers \(surprise removal, link down, or a reset\): (its Memory Space Enable was cleared|a load from its BAR mapping faulted).*run \`pcibench health $a\`" /tmp/card_gone.err ||
	fail "no card-gone line on stderr"
ok "through VFIO: the card named as no longer answering, exit 1 (not SIGBUS's 135)"
grep -q '"gone": ' "$json" || fail "the JSON report has no gone line"

# A driver claims the BAR under a sysfs mapping: while `pio` reads BAR2 over sysfs, vfio-pci is bound and another
# pcibench maps BAR2 through VFIO, so vfio-pci requests the region and the kernel revokes every sysfs mapping of it
# (revoke_iomem; Debian's CONFIG_IO_STRICT_DEVMEM). The running pio's next load faults: the MMIO fault guard turns
# the SIGBUS (exit 135 before it) into all-ones and the run ends with the card-gone line naming the fault, exit 1.
unbind "$a"
mem_enable "$a"
pcibench pio "$a" --bar 2 --map uc --width 64 --dir c2h --size 64K --total 64G --json >"$json" 2>/tmp/card_gone.err &
pid=$!
sysfs_mapped() {
	kill -0 "$pid" 2>/dev/null || { cat /tmp/card_gone.err; fail "pcibench ended before it mapped BAR2"; }
	grep -q "$a/resource2" "/proc/$pid/maps" 2>/dev/null
}
wait_until 60 "pcibench mapping BAR2 over sysfs" sysfs_mapped
ok "pcibench $pid has BAR2 mapped over sysfs: binding vfio-pci and mapping BAR2 through VFIO"
bind_vfio "$a"
pcibench peek "$a" 2 0 --via "$via" || fail "peek through VFIO failed"
rc=0
wait "$pid" || rc=$?
cat /tmp/card_gone.err
[ "$rc" != 135 ] || fail "pcibench died of SIGBUS (exit 135): the fault guard did not catch it"
[ "$rc" = 1 ] || fail "pcibench exit status $rc, want 1"
grep -Eq "^pcibench: (0000:)?$a no longer answers \(surprise removal, link down, or a reset\): a load from its BAR mapping faulted \(SIGBUS" /tmp/card_gone.err ||
	fail "no card-gone line naming the fault on stderr"
grep -q '"gone": ' "$json" || fail "the JSON report has no gone line"
ok "a sysfs mapping revoked under a run: the fault named, exit 1 (not SIGBUS's 135)"
