# machines: pc q35-iommu
# timeout: 240
# Completion by interrupt on the real kernel: edu bound to vfio-pci (no-IOMMU on pc, type1 on q35-iommu) completes
# DMA by MSI and, forced with --irq-kind intx, by INTx (edu raises INTx when MSI is off: hw/misc/edu.c
# edu_raise_irq). Each run is traced; the host checks every interrupt command against edu.c (0x98 with the IRQ
# bit, the status 0x100 read at 0x24, 0x100 written to 0x64) and, for INTx, that every transfer after the first
# completed too, which it cannot without the unmask after each (vfio-pci masks the line when it fires). Then a
# long run per kind is held with SIGSTOP once its trace shows three acknowledged interrupts: the kernel's count
# for the vfio-msi / vfio-intx line in /proc/interrupts must lie between the acknowledged and the started
# interrupt transfers. SIGINT then ends it (exit 130), and a third run is ended by SIGKILL (the kernel's close
# tears down, vfio_pci_core_disable): after each, the vfio line is gone from /proc/interrupts, the MSI enable
# bit is clear in config space, the Interrupt Disable bit is as before, and edu's interrupt status reads 0 (nothing
# left asserting INTx). A cause left by the killed run (edu completes the transfer in flight on INTx once MSI is
# off) is acknowledged by the next run before its first command. Hand-offs wait on the trace, never on a sleep.
. /lab/lib.sh
e=$(find_dev 1234:11e8)
trap 'unbind "$e"' EXIT
bind_vfio "$e"
# No-IOMMU DMA takes memory that cannot move (hugepages); type1 takes them too.
echo 8 >/proc/sys/vm/nr_hugepages
t=/tmp/irq
mkdir -p $t
cfg=$SYS/$e/config
byte() { od -An -tu1 -j"$1" -N1 "$cfg" | tr -d ' '; }
# edu's MSI capability (hw/misc/edu.c msi_init: one 64-bit vector), found by walking the list from 0x34.
msi=$(byte 52)
while [ "$msi" != 0 ] && [ "$(byte "$msi")" != 5 ]; do msi=$(byte $((msi + 1))); done
[ "$msi" != 0 ] || fail "edu has no MSI capability in $cfg"
msi_enabled() { [ $(($(byte $((msi + 2))) & 1)) = 1 ]; }
intx_disable() { echo $(($(byte 5) >> 2 & 1)); }
[ "$(byte 61)" = 1 ] || fail "edu's interrupt pin is $(byte 61), not INTA"
ok "edu: MSI capability at $msi, pin INTA"
expect_rc "0 1 2" 'PASS  interrupts +MSI 1 vector \(64-bit\), INTx pin INTA' pcibench doctor "$e"

# The kernel's count on the line vfio-pci requested for edu (-1: no such line).
line_of() { case $1 in msi) echo "vfio-msi[0]($e)" ;; intx) echo "vfio-intx($e)" ;; esac; }
count() {
	awk -v n="$(line_of "$1")" 'index($0, n) { s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; print s; f = 1 }
		END { if (!f) print -1 }' /proc/interrupts
}
# The other handlers on an INTx line (their interrupts count there too).
sharers() { grep -F "$(line_of intx)" /proc/interrupts | sed 's/.*-[a-z]*  *//' | tr ',' '\n' | grep -cvF 'vfio-intx' || true; }
acks() {
	n=$(grep -c '"off":"0x64","w":32,"v":"0x100"' "$1" 2>/dev/null) || true
	echo "${n:-0}"
}
# One h2c size by polling and by interrupt (h2c only: edu reads host memory, so a transfer still in flight when a
# run is killed writes nowhere). Called directly, so a background run's $! is pcibench itself.
lat="latency $e --width 32 --samples 100 --dma --irq --dir h2c --size 64 --dma-bits 32 --allow-dma"

# After a run ends, by any path: no interrupt left enabled. An orderly end also leaves edu's status clear (every
# interrupt acknowledged); after SIGKILL the transfer in flight may complete and set it (the next run's first
# transfer acknowledges it: edu's engine does so when it finds an interrupt pending).
torn_down() {
	[ "$(count msi)" = -1 ] && [ "$(count intx)" = -1 ] || fail "$1: a vfio line is still in /proc/interrupts: $(grep vfio /proc/interrupts)"
	! msi_enabled || fail "$1: MSI still enabled in $cfg"
	[ "$(intx_disable)" = "$cmd_before" ] || fail "$1: Interrupt Disable $(intx_disable), was $cmd_before"
	if [ "$2" = orderly ]; then
		expect_out "^$e BAR0\\+0x24 = 0x00000000\$" pcibench peek "$e" 0 0x24 --width 32
	fi
	ok "$1: no vfio line in /proc/interrupts, MSI disabled, Interrupt Disable as found ($cmd_before)${2:+, edu's status 0}"
}
idle() { pcibench peek "$e" 0 0x98 --width 32 | grep -Eq '= 0x0000000[02468ace]$'; }

cmd_before=$(intx_disable)
for k in msi intx; do
	# Completion by each kind, traced: 4 polled and 4 interrupt transfers, verified.
	emit ${k}_run pcibench $lat --irq-kind $k --dma-samples 4 --json --trace $t/$k.jsonl
	emit ${k}_trace cat $t/$k.jsonl
	torn_down "$k run" orderly

	# Held mid-run with SIGSTOP once three interrupts are acknowledged; the kernel's count read while it is held.
	pcibench $lat --irq-kind $k --dma-samples 60 --trace $t/${k}_held.jsonl >$t/${k}_held.out 2>&1 &
	pid=$!
	# The line's count before the first interrupt transfer: a legacy IRQ keeps its count from earlier handlers
	# (the INTx run above), MSI vectors start at 0. The polled row (60 transfers) runs first, so the line is
	# there, routed, long before the first command with the IRQ bit, which the trace would show.
	routed() { [ "$(count $k)" != -1 ] || ! kill -0 $pid 2>/dev/null; }
	wait_until 120 "the $k line of the held run in /proc/interrupts" routed
	base=$(count $k)
	! grep -q '"off":"0x98","w":32,"v":"0x5"' $t/${k}_held.jsonl || fail "an interrupt transfer began before the baseline"
	three() { [ "$(acks $t/${k}_held.jsonl)" -ge 3 ] || ! kill -0 $pid 2>/dev/null; }
	wait_until 120 "three acknowledged $k interrupts in the trace" three
	kill -STOP $pid 2>/dev/null || fail "the $k run ended before it was held: $(cat $t/${k}_held.out)"
	# The count, then the trace as it stands: neither moves while the run is held but for the transfer in flight.
	c=$(count $k)
	cp $t/${k}_held.jsonl $t/${k}_at_stop.jsonl
	shared=0
	[ $k = msi ] || shared=$(sharers)
	echo "@@OUT ${k}_count"
	echo "$c $base $shared"
	echo "@@ENDOUT ${k}_count"
	kill -INT $pid
	kill -CONT $pid
	rc=0
	wait $pid || rc=$?
	[ $rc = 130 ] || fail "the $k run interrupted by SIGINT exited $rc, want 130: $(cat $t/${k}_held.out)"
	emit ${k}_held cat $t/${k}_at_stop.jsonl
	emit ${k}_ended cat $t/${k}_held.jsonl
	torn_down "$k run ended by SIGINT" orderly

	# SIGKILL, which pcibench cannot catch: the kernel's close of the device fd tears the interrupts down.
	pcibench $lat --irq-kind $k --dma-samples 60 --trace $t/${k}_killed.jsonl >/dev/null 2>&1 &
	pid=$!
	one() { [ "$(acks $t/${k}_killed.jsonl)" -ge 1 ] || ! kill -0 $pid 2>/dev/null; }
	wait_until 120 "an acknowledged $k interrupt in the trace" one
	kill -KILL $pid 2>/dev/null || fail "the $k run ended before SIGKILL"
	wait $pid || true
	torn_down "$k run killed"
	wait_until 30 "edu idle after the killed $k run" idle
done
# After the INTx run was killed, edu's last transfer may have left INTx asserted: the next run completes by INTx
# all the same, and leaves nothing behind.
emit recovered pcibench $lat --irq-kind intx --dma-samples 2 --json
torn_down "run after the kill" orderly
