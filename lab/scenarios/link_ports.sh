# PCIe root ports with set link speed and width (QEMU pcie-root-port x-speed/x-width) and the endpoints behind
# them: pcibench info and doctor agree with lspci (Debian's, from the tools disk) on each end's LnkCap and
# LnkSta and on lspci's notion of degraded: a root port is never DEGRADED by its own LnkCap (lspci marks none);
# each line names the link partner. doctor gives a bridge one answer: not a target, the endpoint below it.
# machines: q35-inuse
# timeout: 90
. /lab/lib.sh
use_tools
inuse_modules

# port (addr=0x10.. in host/inuse.sh) and the LnkCap its x-speed/x-width set.
for pc in 0000:00:10.0=Gen4x16 0000:00:11.0=Gen3x4 0000:00:12.0=Gen1x1 0000:00:13.0=Gen4x32 0000:00:14.0=Gen3x8; do
	p=${pc%=*} want=$(echo "${pc#*=}" | sed 's/x/ x/')
	l=$(lnk "$p")
	cap=${l%|*} sta=${l#*|}
	echo "port $p: lspci LnkCap $cap, LnkSta $sta"
	[ "$cap" = "$want" ] || fail "$p LnkCap is $cap, the lab set $want"
	case $sta in *downgraded*) fail "lspci marks root port $p downgraded" ;; esac
	info=$(pcibench info "$p")
	printf '%s\n' "$info" | grep -E '^  Link'
	printf '%s\n' "$info" | grep -q "^  Link:          ${sta%% (*} ([0-9.]* GT/s PCIe), max $cap\$" ||
		fail "pcibench info $p disagrees with lspci (LnkSta $sta, LnkCap $cap)"
	printf '%s\n' "$info" | grep -q DEGRADED && fail "pcibench flags root port $p DEGRADED; lspci does not"
	ok "info $p: $sta of $cap, not degraded, as lspci says"
	e=$(ls "$SYS/$p" | grep -E '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$' | head -n 1)
	if [ -z "$e" ]; then
		printf '%s\n' "$info" | grep -q '^  Link partner:  none found below it' || fail "$p: empty port not said"
		doc=$(pcibench doctor "$p" 2>&1) || true
		printf '%s\n' "$doc" | grep -E '^[A-Z]+  link |^recommended'
		printf '%s\n' "$doc" | grep -Eq '^INFO  link +.*nothing found below it' || fail "doctor $p: empty port not said"
		printf '%s\n' "$doc" | grep -qx "recommended: none: $p is a bridge, not a target, and nothing is below it" ||
			fail "doctor $p: recommendation for an empty port"
		ok "doctor $p: an empty port, no verdict on its link, not a target"
		continue
	fi
	l=$(lnk "$e")
	ecap=${l%|*} esta=${l#*|}
	echo "  endpoint $e: lspci LnkCap $ecap, LnkSta $esta"
	printf '%s\n' "$info" | grep -q "^  Link partner:  $e (device below it), max $ecap; the link can train to " ||
		fail "pcibench info $p does not name $e ($ecap) as its link partner"
	einfo=$(pcibench info "$e")
	printf '%s\n' "$einfo" | grep -E '^  Link'
	printf '%s\n' "$einfo" | grep -q "^  Link:          ${esta%% (*} ([0-9.]* GT/s PCIe), max $ecap" ||
		fail "pcibench info $e disagrees with lspci (LnkSta $esta, LnkCap $ecap)"
	printf '%s\n' "$einfo" | grep -q "^  Link partner:  $p (upstream port), max $cap; " ||
		fail "pcibench info $e does not name $p ($cap) as its link partner"
	case $esta in
	*downgraded*) printf '%s\n' "$einfo" | grep -q DEGRADED || fail "lspci marks $e downgraded, pcibench does not" ;;
	*) printf '%s\n' "$einfo" | grep -q DEGRADED && fail "pcibench flags $e DEGRADED, lspci does not" ;;
	esac
	ok "info $e agrees with lspci on $esta of $ecap, behind $p"
	# doctor: the port's link is healthy; the port is not a target, its endpoint is (one run each, many checks).
	rc=0
	doc=$(pcibench doctor "$p" 2>&1) || rc=$?
	printf '%s\n' "$doc"
	[ "$rc" = 2 ] || fail "doctor $p: exit status $rc, want 2"
	for pat in '^(PASS|INFO)  link ' "^FAIL  device +$p .*: a bridge \(Root Port\), not a target" "^  run: pcibench doctor $e\$"; do
		printf '%s\n' "$doc" | grep -Eq -- "$pat" || fail "doctor $p: no line matches /$pat/"
	done
	printf '%s\n' "$doc" | grep -Eq 'setup .*--vfio|unbind|driver_override|drivers_probe|--sysfs-user|reseat' &&
		fail "doctor $p offers to take the port, or says reseat"
	ok "doctor $p: link healthy, not a target, points at $e, offers nothing that takes it"
	expect_err "$p is a PCI bridge, not a target: .* use the endpoint\(s\) below it: $e" pcibench setup "$p" --vfio
	doc=$(pcibench doctor "$e" 2>&1) || true
	printf '%s\n' "$doc" | grep -E '^[A-Z]+  link '
	printf '%s\n' "$doc" | grep -Eq '^(PASS|INFO)  link ' || fail "doctor $e: its link is not healthy"
	printf '%s\n' "$doc" | grep -q reseat && fail "doctor $e says reseat"
	ok "doctor $e: link healthy"
done
