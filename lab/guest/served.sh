# Helpers for the scenarios on q35-vu and q35-vu-noiommu (lab/host/served.sh), whose guests hold pcibench's served
# simulated cards through QEMU's vfio-user-pci; sourced after /lab/lib.sh. Each card sits alone behind a PCIe root
# port, the ports at 00:10.0 upwards in this order:
SERVED_CARDS="sim sim-qdma sim-nvram sim-xdma-st sim-qdma-st"
# Users' models (pcibench serve --model, docs/models.md), on the ports after the cards'.
SERVED_MODELS="edu-rtl"
TOOLS=/lab/tools

# served CARD: the address (0000:BB:00.0) of the function serving CARD, from its root port's secondary bus.
served() {
	i=16
	for c in $SERVED_CARDS $SERVED_MODELS; do
		if [ "$c" = "$1" ]; then
			port=0000:00:$(printf %02x $i).0
			[ -e "$SYS/$port/config" ] || fail "no root port $port for $1"
			bus=$(od -An -tu1 -j25 -N1 "$SYS/$port/config" | tr -d ' ')
			a=0000:$(printf %02x "$bus"):00.0
			[ -e "$SYS/$a" ] || fail "no function behind $port for $1 (is its server running?)"
			echo "$a"
			return 0
		fi
		i=$((i + 1))
	done
	fail "served: unknown card $1 (known: $SERVED_CARDS $SERVED_MODELS)"
}

# lspci ARGS...: Debian's lspci with the libraries it loads and the pci.ids pcibench is built with (/lab/tools).
lspci() { "$TOOLS/lib/ld-linux-x86-64.so.2" --library-path "$TOOLS/lib" "$TOOLS/lspci" -i "$TOOLS/pci.ids" "$@"; }

# irqs ADDR: the kernel's count of every vfio interrupt line of ADDR in /proc/interrupts (vfio-msix[N](ADDR),
# vfio-msi[N](ADDR), vfio-intx(ADDR)), summed over CPUs; 0 when it has none.
irqs() {
	awk -v a="($1)" 'index($0, a) && /vfio-/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' \
		/proc/interrupts
}

# via_of: pcibench's --via for this machine's VFIO flavour.
via_of() { if [ "$LAB_VFIO" = noiommu ]; then echo vfio-noiommu; else echo vfio; fi; }

# size_bytes 1M|128K|4096: lspci's [size=...] in bytes.
size_bytes() {
	case $1 in
	*K) echo $((${1%K} << 10)) ;; *M) echo $((${1%M} << 20)) ;; *G) echo $((${1%G} << 30)) ;; *) echo $(($1)) ;;
	esac
}

# facts_lspci ADDR / facts_info ADDR: what lspci -vvv and pcibench info each say of a function, as the same
# normalized lines (sorted), so the two can be compared line by line:
#   id VVVV:DDDD | bar N START SIZE BITS pref|non-pref | cap OFF (MSI|MSI-X|PCIe|OTHER)
#   msix COUNT TABLE_BAR TABLE_OFF PBA_BAR PBA_OFF | msi COUNT BITS | intx PIN
facts_lspci() {
	lspci -vvv -nn -s "$1" 2>/dev/null | awk '
		NR == 1 { if (match($0, /\[[0-9a-f]{4}:[0-9a-f]{4}\]/)) print "id", substr($0, RSTART + 1, 9) }
		/^\tRegion [0-9]: Memory at / {
			n = $2; sub(":", "", n); start = $5
			bits = ($0 ~ /64-bit/) ? 64 : 32; pref = ($0 ~ / prefetchable/) ? "pref" : "non-pref"
			match($0, /\[size=[0-9]+[KMG]?\]/); size = substr($0, RSTART + 6, RLENGTH - 7)
			print "bar", n, "0x" start, size, bits, pref
		}
		/^\tCapabilities: \[[0-9a-f][0-9a-f]\] / {
			off = substr($2, 2, 2); kind = "OTHER"
			if ($3 == "MSI-X:") kind = "MSI-X"; else if ($3 == "MSI:") kind = "MSI"; else if ($3 == "Express") kind = "PCIe"
			print "cap", off, kind
			if (kind == "MSI-X") { c = $0; sub(/.*Count=/, "", c); sub(/ .*/, "", c); mx = c }
			if (kind == "MSI") { c = $0; sub(/.*Count=[0-9]+\//, "", c); sub(/ .*/, "", c); print "msi", c, ($0 ~ /64bit\+/) ? 64 : 32 }
		}
		/^\t\tVector table: BAR=/ { split($3, b, "="); split($4, o, "="); tb = b[2]; to = o[2] }
		/^\t\tPBA: BAR=/ { split($2, b, "="); split($3, o, "="); printf "msix %s %s 0x%x %s 0x%x\n", mx, tb, ("0x" to) + 0, b[2], ("0x" o[2]) + 0 }
		/^\tInterrupt: pin [A-D]/ { print "intx", $3 }
	' | while read -r k a b c d e; do
		# Sizes and offsets to plain numbers (busybox awk reads no hex: the shell converts).
		case $k in
		bar) echo "bar $a $(printf 0x%x $((b))) $(size_bytes "$c") $d $e" ;;
		msix) echo "msix $a $b $(printf 0x%x $((0x$(echo "$c" | sed 's/^0x//')))) $d $(printf 0x%x $((0x$(echo "$e" | sed 's/^0x//'))))" ;;
		*) echo "$k $a${b:+ $b}${c:+ $c}" ;;
		esac
	done | sort
}
facts_info() {
	pcibench info "$1" | awk '
		NR == 1 { if (match($0, /\[[0-9a-f]{4}:[0-9a-f]{4}\]/)) print "id", substr($0, RSTART + 1, 9) }
		/^  BAR[0-9]: 0x[0-9a-f]+ size .* memory / {
			n = substr($1, 4, 1); start = $2; size = $0; sub(/.*\(/, "", size); sub(/\).*/, "", size)
			bits = ($0 ~ / 64-bit /) ? 64 : 32; pref = ($0 ~ / prefetchable /) ? "pref" : "non-pref"
			print "bar", n, start, size, bits, pref
		}
		/^  Capabilities: / {
			sub(/^  Capabilities: +/, "")
			n = split($0, caps, ", ")
			for (i = 1; i <= n; i++) {
				off = substr(caps[i], 2, 2); name = substr(caps[i], 6); kind = "OTHER"
				if (name == "MSI-X") kind = "MSI-X"; else if (name == "MSI") kind = "MSI"; else if (name == "PCI Express") kind = "PCIe"
				print "cap", off, kind
			}
		}
		/^  Interrupts: / {
			if (match($0, /MSI-X [0-9]+ vectors \(table BAR[0-7] at 0x[0-9a-f]+, PBA BAR[0-7] at 0x[0-9a-f]+\)/)) {
				split(substr($0, RSTART, RLENGTH), w, " ")
				print "msix", w[2], substr(w[5], 4), substr(w[7], 1, length(w[7]) - 1), substr(w[9], 4), substr(w[11], 1, length(w[11]) - 1)
			}
			if (match($0, /MSI [0-9]+ vectors? \([0-9]+-bit\)/)) {
				split(substr($0, RSTART, RLENGTH), w, " "); print "msi", w[2], substr(w[4], 2, 2)
			}
			if (match($0, /INTx pin [A-D]/)) print "intx", substr($0, RSTART + 9, 1)
		}
	' | while read -r k a b c d e; do
		case $k in bar) echo "bar $a $(printf 0x%x $((b))) $((c)) $d $e" ;; *) echo "$k $a${b:+ $b}${c:+ $c}${d:+ $d}${e:+ $e}" ;; esac
	done | sort
}

# rows_ok MIN CMD...: CMD exits 0 and every result row of its table (dma's and latency --dma's: h2c, c2h or bidir,
# by polling or interrupt) says its data verified (`ok`); at least MIN rows. Prints the output.
rows_ok() {
	min=$1
	shift
	rc=0
	out=$("$@" 2>&1) || rc=$?
	printf '%s\n' "$out"
	[ "$rc" = 0 ] || fail "exit status $rc: $*"
	# (latency's summary lines, "h2c    4 KiB: poll p50 ...", are not rows)
	rows=$(printf '%s\n' "$out" | grep -E '^((poll|irq) +)?(h2c|c2h|bidir) |^dma (poll|irq) ' | grep -Ev '[KMG]?i?B: ' || true)
	n=$(printf '%s\n' "$rows" | grep -c . || true)
	bad=$(printf '%s\n' "$rows" | grep -Ev ' ok( |$)' || true)
	[ -z "$bad" ] || fail "rows not verified: $bad"
	[ "$n" -ge "$min" ] || fail "$n result rows, want at least $min: $*"
	ok "$n rows verified: $*"
}

# Hugepages for DMA buffers (no-IOMMU needs memory that cannot move; type1 takes them too).
hugepages() { [ "$(cat /proc/sys/vm/nr_hugepages)" -ge "$1" ] || echo "$1" >/proc/sys/vm/nr_hugepages; }

# traced_irqs TRACE: the interrupt signals a trace counted (the sum of its irq lines' n).
traced_irqs() { grep -F '"ev":"irq",' "$1" 2>/dev/null | sed 's/.*"n":\([0-9]*\).*/\1/' | awk '{ s += $1 } END { print s + 0 }'; }
# pending_irqs PID: signals the kernel delivered to PID's eventfds that it has not read yet (fdinfo's eventfd-count).
pending_irqs() {
	s=0
	for f in /proc/$1/fdinfo/*; do
		v=$(sed -n 's/^eventfd-count: *//p' "$f" 2>/dev/null)
		[ -z "$v" ] || s=$((s + 0x$v))
	done
	echo $s
}

# intx_tally: "HANDLED UNCLAIMED RESENT" for the guest's vfio-pci INTx since intx_from, by kretprobes on its handlers
# (drivers/vfio/pci/vfio_pci_intrs.c), counted from the trace by return value: the hard-IRQ handler's IRQ_HANDLED
# (each signals the eventfd once) and IRQ_NONE returns, and the unmask handler's returns of 1, a re-send of the
# signal while the function still asserts its line, which /proc/interrupts never counts (lab/findings.md 14). By
# return value, because vfio_send_intx_eventfd itself is inlined where the handler signals (its probe saw no call).
# The line's number is no help before the run: sysfs names the firmware's IRQ until vfio-pci enables the device.
TRACEFS=/sys/kernel/tracing
intx_from() {
	[ -e $TRACEFS/kprobe_events ] || mount -t tracefs nodev $TRACEFS || fail "no tracefs for the INTx kprobes"
	if [ ! -d $TRACEFS/events/kprobes/lab_intx_irq ]; then
		echo 'r:lab_intx_irq vfio_intx_handler ret=$retval' >>$TRACEFS/kprobe_events &&
			echo 'r:lab_intx_unmask vfio_pci_intx_unmask_handler ret=$retval' >>$TRACEFS/kprobe_events ||
			fail "cannot probe vfio-pci's INTx handlers"
		echo 1 >$TRACEFS/events/kprobes/lab_intx_irq/enable
		echo 1 >$TRACEFS/events/kprobes/lab_intx_unmask/enable
	fi
	: >$TRACEFS/trace
}
intx_tally() {
	for p in 'irq:.* ret=0x1$' 'irq:.* ret=0x0$' 'unmask:.* ret=0x1$'; do
		grep -c "lab_intx_$p" $TRACEFS/trace || true
	done | tr '\n' ' '
}

# irq_held CARD KIND [ARGS...]: completion by interrupt of KIND (msix, msi, intx) on CARD, traced, held with SIGSTOP
# once three waits have collected signals: the interrupts the kernel's vfio-pci handled on the card's lines (their
# count in /proc/interrupts; for INTx, the signals vfio-pci sent: the interrupts its handler claimed and its re-sends
# at unmask, intx_tally) must be what pcibench counted (the trace's irq lines) plus what its eventfds hold unread.
# A hold that falls between a wait reading its eventfds and tracing them is let go and taken again once a further
# line is traced. Then SIGINT ends the run (exit 130) and no vfio line of the card is left. ARGS go to pcibench dma.
#
# INTx that no handler claimed is QEMU's: without KVM it lowers its pin only at the function's next BAR access
# (hw/vfio/region.c), so a signal that reaches it after the handler has cleared the cause leaves the pin up with
# Interrupt Status clear, and the guest's vfio-pci returns IRQ_NONE until that access; the count is reported.
irq_held() {
	c=$1 k=$2
	shift 2
	a=$(served "$c")
	t=/tmp/held-$c-$k.jsonl
	rm -f "$t"
	intx=
	if [ "$k" = intx ]; then
		intx=1
		intx_from
	fi
	pcibench dma "$a" --allow-dma --size 4K --total 1G --dir h2c --completion irq --irq-kind "$k" "$@" --trace "$t" \
		>/tmp/held.out 2>&1 &
	pid=$!
	lines() {
		n=$(grep -cF '"ev":"irq",' "$t" 2>/dev/null) || true
		echo "${n:-0}"
	}
	more() { [ "$(lines)" -ge "$want" ] || ! kill -0 $pid 2>/dev/null; }
	want=3
	held=
	for try in 1 2 3 4 5; do
		wait_until 120 "$want interrupt lines in the trace of $c $k" more
		kill -STOP $pid 2>/dev/null || fail "$c $k: the run ended before it was held: $(cat /tmp/held.out)"
		kern=$(irqs "$a") traced=$(traced_irqs "$t") pend=$(pending_irqs $pid) spurious=0 resent=0 sent=
		if [ -n "$intx" ]; then
			set -- $(intx_tally)
			kern=$1 spurious=$2 resent=$3 sent=$(($1 + $3))
		fi
		echo "$c $k hold $try: handled $kern (not claimed $spurious)${sent:+, re-sent at unmask $resent}, traced $traced, unread $pend"
		if [ "${sent:-$kern}" = $((traced + pend)) ] && [ "$traced" -gt 0 ]; then
			held=1
			break
		fi
		want=$(($(lines) + 1))
		kill -CONT $pid
	done
	if [ -z "$held" ]; then
		grep "($a)" /proc/interrupts || true
		echo "command $(od -An -tx2 -j4 -N2 "$SYS/$a/config"), status $(od -An -tx2 -j6 -N2 "$SYS/$a/config")"
		dmesg | tail -n 5
		kill -KILL $pid
		fail "$c $k: the kernel counted $kern interrupts${sent:+ and sent $sent signals}, pcibench $traced (+$pend unread)"
	fi
	grep "($a)" /proc/interrupts
	kill -INT $pid
	kill -CONT $pid
	rc=0
	wait $pid || rc=$?
	[ $rc = 130 ] || fail "$c $k: the run ended by SIGINT exited $rc, want 130: $(cat /tmp/held.out)"
	[ "$(irqs "$a")" = 0 ] && ! grep -q "($a)" /proc/interrupts || fail "$c $k: a vfio line is left: $(grep "($a)" /proc/interrupts)"
	if [ -n "$intx" ]; then
		ok "$c $k: vfio-pci sent $sent signals ($kern interrupts handled, $resent re-sent at unmask), pcibench counted $traced and $pend were unread; $spurious not claimed (QEMU's INTx pin), none left after SIGINT"
	else
		ok "$c $k: the kernel handled the $traced interrupts pcibench counted (+$pend unread), none left after SIGINT"
	fi
}
