# pcibench reset on a real kernel (issue 56): edu alone behind root port 0000:00:01.0 (slot=1), where the kernel
# offers its bus reset alone (no FLR, no PM). edu reset four ways: VFIO_DEVICE_RESET, the kernel's bus reset (sysfs,
# reset_method chosen and put back), a bus reset of its port by the kernel (reset_subordinate) and by pcibench
# (Bridge Control, config space saved and restored as the kernel does). Each seen to reach edu: a marker in its MSI
# Message Data (QEMU's reset clears it, the kernel keeps no MSI state while MSI is off) reads 0, or pcibench's reset
# names it among what it restored; edu answers and a DMA verifies after each. Also the slot, --list, refusals.
# machines: q35-pcie
# timeout: 240
. /lab/lib.sh

port=0000:00:01.0
e=$(edu_behind "$port")
restore() {
	readd "$e"
}
trap restore EXIT
echo 8 >/proc/sys/vm/nr_hugepages

# edu's MSI capability (the first one: 0x40, 64-bit: Message Data at +0x0c).
msi=$(od -An -tu1 -j52 -N1 "$SYS/$e/config" | tr -d ' ')
[ "$(od -An -tu1 -j"$msi" -N1 "$SYS/$e/config" | tr -d ' ')" = 5 ] || fail "no MSI capability at $msi"
data=$((msi + 12))
put_marker() { printf '\064\022' | dd of="$SYS/$e/config" bs=1 seek="$data" count=2 conv=notrunc 2>/dev/null; }
marker() { od -An -tx2 -j"$data" -N2 "$SYS/$e/config" | tr -d ' '; }

works() {
	expect_out "BAR0\+0x0 = 0x010000ed" pcibench peek "$e" 0 0
	pcibench poke "$e" 0 4 0x12345678 --allow-write >/dev/null
	expect_out "BAR0\+0x4 = 0xedcba987" pcibench peek "$e" 0 4
	expect_out '^h2c +4095 B .* ok( ![a-z]+)*$' pcibench dma "$e" --engine edu --dma-bits 32 --total 8K --allow-dma
	ok "edu answers and a DMA verifies after the reset ($1)"
}

# The slot the kernel made for the port's slot (its address is edu's bus and device), as lspci would name it.
slot=
for s in /sys/bus/pci/slots/*; do [ "$(cat "$s/address" 2>/dev/null)" = "${e%.*}" ] && slot=$(basename "$s"); done
[ -n "$slot" ] || fail "no /sys/bus/pci/slots entry for ${e%.*}"
expect_out "^  Physical slot: $slot \(/sys/bus/pci/slots/$slot\)$" pcibench info "$e"
expect_out "^  kernel:  yes \(sysfs reset; reset_method: bus\)$" pcibench reset "$e" --list
expect_out "^  port:    $port, a secondary bus reset by (the kernel \(reset_subordinate\)|pcibench \(Bridge Control\)) \(resets $e\)$" pcibench reset "$e" --list
expect_rc 1 "add --allow-reset to consent" pcibench reset "$e"
expect_rc 1 "is a PCI bridge" pcibench reset "$port" --allow-reset
expect_rc "0 1 2" "^INFO  reset +it can be reset by the kernel's reset \(bus\), a secondary bus reset of its port $port; auto takes kernel" pcibench doctor "$e"

bind_vfio "$e"
expect_out "^  auto:    vfio: " pcibench reset "$e" --list

# 1. VFIO_DEVICE_RESET.
put_marker
[ "$(marker)" = 1234 ] || fail "the marker did not stick: $(marker)"
expect_out "^$e: reset by vfio \(VFIO_DEVICE_RESET through vfio-pci \(the kernel's methods: bus\)\)$" pcibench reset "$e" --allow-reset
[ "$(marker)" = 0000 ] || fail "MSI Message Data still $(marker): the reset did not reach edu"
ok "VFIO_DEVICE_RESET reached edu (MSI Message Data cleared)"
works vfio

# 2. The kernel's bus reset, chosen through reset_method and put back.
put_marker
expect_out "^$e: put reset_method back to bus$" pcibench reset "$e" --method bus --allow-reset
[ "$(marker)" = 0000 ] || fail "MSI Message Data still $(marker) after the kernel's bus reset"
[ "$(cat "$SYS/$e/reset_method")" = bus ] || fail "reset_method is now $(cat "$SYS/$e/reset_method")"
ok "the kernel's bus reset reached edu; reset_method as it was"
expect_err "the kernel does not offer flr for $e" pcibench reset "$e" --method flr --allow-reset
works bus

# 3. A secondary bus reset of the port: the kernel's reset_subordinate where it has one (pci_reset_bus).
put_marker
expect_out "^$e: reset by port \(a secondary bus reset of port $port by (the kernel|pcibench)" pcibench reset "$e" --method port --allow-reset
if [ -e "$SYS/$port/reset_subordinate" ]; then
	[ "$(marker)" = 0000 ] || fail "MSI Message Data still $(marker) after the kernel's reset of the bus below $port"
	ok "the kernel's reset_subordinate of $port reached edu"
fi
works port

# 4. The same by pcibench itself through the port's Bridge Control: what it restores names what the reset cleared.
put_marker
cmd=$(od -An -tx2 -j4 -N2 "$SYS/$e/config" | tr -d ' ')
out=$(pcibench reset "$e" --method bridge --allow-reset --json) || fail "reset --method bridge: $out"
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q "set and cleared Secondary Bus Reset in $port's Bridge Control" || fail "no bus reset step"
printf '%s\n' "$out" | grep -Eq "restored .*BAR0.*Command.*MSI data.* of $e" || fail "BAR0, Command and MSI data not restored"
[ "$(marker)" = 1234 ] || fail "MSI Message Data $(marker) after the restore, want the saved 1234"
[ "$(od -An -tx2 -j4 -N2 "$SYS/$e/config" | tr -d ' ')" = "$cmd" ] || fail "command register not restored to $cmd"
ok "pcibench's bus reset of $port cleared edu and put back what it saved"
works bridge
expect_out "^  Link: +Gen3 x4" pcibench info "$port"
