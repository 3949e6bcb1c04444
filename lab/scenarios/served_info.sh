# The served simulated cards as the guest's kernel sees them through QEMU's vfio-user-pci (lab/host/served.sh):
# each of sim, sim-qdma, sim-nvram, sim-xdma-st and sim-qdma-st is a PCI function behind a root port of its own,
# with the ids, BARs and interrupts its server gives, and `pcibench info` says what `lspci -vvv` says of it: ids,
# every BAR (address, size, 64-bit, prefetchable), the capability list, the MSI-X vector count with its table's and
# PBA's BAR and offset, MSI's vector count and address width, the INTx pin. Then `doctor` on each, unbound: the
# interrupts it offers, and the way in.
# machines: q35-vu
# timeout: 150
. /lab/lib.sh
. /lab/served.sh
# What each server offers (crates/pcibench/src/sim/*/card.rs): ids, BAR sizes, interrupts.
want() {
	case $1 in
	sim | sim-xdma-st) echo "10ee:7024 0:1048576 2:131072 4:65536 msix msi intx" ;;
	sim-qdma) echo "10ee:903f 0:262144 2:262144 msix" ;;
	sim-qdma-st) echo "10ee:903f 0:262144 2:4096 msix" ;;
	sim-nvram) echo "1332:5425 0:4096 2:16777216 intx" ;;
	esac
}
for c in $SERVED_CARDS; do
	a=$(served "$c")
	echo "== $c at $a"
	l=$(facts_lspci "$a")
	i=$(facts_info "$a")
	printf '%s\n' "$l"
	[ "$l" = "$i" ] || {
		printf 'pcibench info says:\n%s\n' "$i"
		fail "$c: pcibench info and lspci -vvv differ"
	}
	set -- $(want "$c")
	echo "$l" | grep -qx "id $1" || fail "$c: ids are not $1"
	shift
	for w in "$@"; do
		case $w in
		*:*) echo "$l" | grep -Eq "^bar ${w%%:*} 0x[0-9a-f]+ ${w#*:} 64 pref$" || fail "$c: no 64-bit prefetchable BAR${w%%:*} of ${w#*:} bytes" ;;
		msix) echo "$l" | grep -Eq '^msix [0-9]+ [0-5] 0x[0-9a-f]+ [0-5] 0x[0-9a-f]+$' || fail "$c: no MSI-X table and PBA" ;;
		msi) echo "$l" | grep -q '^msi ' || fail "$c: no MSI" ;;
		intx) echo "$l" | grep -q '^intx A$' || fail "$c: no INTx pin A" ;;
		esac
	done
	ok "$c: pcibench info agrees with lspci -vvv: $(echo "$l" | grep -c '^bar') BARs, $(echo "$l" | grep -c '^cap') capabilities, interrupts $(echo "$l" | grep -E '^(msix|msi|intx)' | cut -d' ' -f1 | tr '\n' ' ')"
	# Unbound, no driver: doctor names the interrupts config space offers and the way in.
	out=$(pcibench doctor "$a" 2>&1) || true
	printf '%s\n' "$out" | grep -E '^(PASS|WARN|FAIL|INFO) +interrupts ' || fail "$c: doctor has no interrupts check"
	printf '%s\n' "$out" | grep -q '^recommended: ' || fail "$c: doctor recommends no path"
	ok "$c: doctor: $(printf '%s\n' "$out" | grep '^recommended: ')"
done
