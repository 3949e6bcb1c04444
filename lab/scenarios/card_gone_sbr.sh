# A card lost to a secondary bus reset mid-run (issue 37), the second way to lose one: edu sits behind root port
# 0000:00:01.0 (machine q35-pcie); while `latency` reads edu's registers over sysfs, another process sets the
# port's Bridge Control Secondary Bus Reset bit (PCI-to-PCI Bridge 1.2 §3.2.5.18, bit 6 of config 0x3E: what
# `setpci -s PORT BRIDGE_CONTROL=0x40:0x40` writes; QEMU resets the bus on the bit's rising edge) and clears it.
# The reset puts edu's command register to 0: pcibench stops with the card-gone line, exit 1 (latency used to
# report it as a plain error). `health --state` kept before the run names Memory Space Enable cleared, and once a
# driver is bound again health flags Memory Space as off. Event-driven: the reset waits until pcibench has mapped
# BAR0 (resource0 in its maps). At the end edu is removed and rescanned, so the kernel assigns its BARs afresh.
# machines: q35-pcie
# timeout: 120
. /lab/lib.sh

port=0000:00:01.0
e=$(edu_behind "$port")
restore() {
	readd "$e"
	mem_enable "$e"
	rm -f /tmp/sbr.state
}
trap restore EXIT
unbind "$e"
mem_enable "$e"
byte_at() { od -An -tu1 -j"$2" -N1 "$SYS/$1/config" | tr -d ' '; }
put_byte() { printf "\\$(printf %03o "$3")" | dd of="$SYS/$1/config" bs=1 seek="$2" count=1 conv=notrunc 2>/dev/null; }

expect_rc "0 1 2" "$e" pcibench health "$e" --state /tmp/sbr.state
pcibench latency "$e" --bar 0 --offset 0 --width 32 --samples 100000000 --json >/tmp/sbr.json 2>/tmp/sbr.err &
pid=$!
mapped() {
	kill -0 "$pid" 2>/dev/null || { cat /tmp/sbr.err; fail "pcibench ended before it mapped BAR0"; }
	grep -q "$e/resource0" "/proc/$pid/maps" 2>/dev/null
}
wait_until 60 "pcibench mapping edu's BAR0" mapped
ok "pcibench $pid has BAR0 mapped: secondary bus reset through $port's Bridge Control"
ctl=$(byte_at "$port" 62)
put_byte "$port" 62 $((ctl | 64))
put_byte "$port" 62 $((ctl & ~64))
[ $(($(byte_at "$e" 4) & 2)) = 0 ] || fail "edu's Memory Space Enable survived the bus reset"
rc=0
wait "$pid" || rc=$?
cat /tmp/sbr.err
[ "$rc" = 1 ] || fail "pcibench exit status $rc, want 1"
grep -Eq "^pcibench: (0000:)?$e no longer answers \(surprise removal, link down, or a reset\): .*upstream port $port: link up.*run \`pcibench health $e\`" /tmp/sbr.err ||
	fail "no card-gone line naming the port on stderr"
grep -q '"gone": ' /tmp/sbr.json || fail "the JSON report has no gone line"
ok "the card lost to a bus reset is named, exit 1"
expect_rc 2 "FAIL  Memory Space Enable of $e was cleared \(command register 0x[0-9a-f]{4} to 0x0000\)" pcibench health "$e" --state /tmp/sbr.state
bind_vfio "$e"
expect_rc 2 "FAIL  $e  Memory Space is off: the BARs of $e do not answer \(a reset or another process cleared it\)" pcibench health "$e"
expect_rc 2 "Mem- BusMaster- DisINTx-" pcibench health "$e"
ok "health shows the reset: Memory Space off under a bound driver"
