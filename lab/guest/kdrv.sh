# Helpers for the scenarios on q35-vu612 (lab/host/kdrv.sh): AMD's own XDMA and QDMA dmaengine drivers of Linux
# 6.12 driving the served simulated cards through the glue module lab/kmod/pcibench_kdrv.c; sourced after
# /lab/lib.sh and /lab/served.sh.
KO=/lib/kdrv
DBG=/sys/kernel/debug

# kdrv_load: the dmaengine core, regmap and the two vendor drivers, then the glue (each once per boot); a transfer's
# time limit grows with the host's (LAB_SCALE), as every bounded wait here does.
kdrv_load() {
	for m in dmaengine regmap xdma amd-qdma pcibench_kdrv; do
		args=
		[ "$m" = pcibench_kdrv ] && args=timeout_ms=$((10000 * ${LAB_SCALE:-1}))
		grep -q "^$(echo "$m" | tr - _) " /proc/modules || insmod "$KO/$m.ko" $args ||
			fail "insmod $m.ko failed: $(dmesg | tail -n 5)"
	done
	grep -q " $DBG debugfs" /proc/mounts || mount -t debugfs debugfs "$DBG"
	ok "modules loaded: dmaengine regmap xdma amd-qdma pcibench_kdrv"
}

# kdrv_bind ADDR: the glue takes the function (driver_override: it has no id table), which registers the vendor
# driver's platform device and takes its channels.
kdrv_bind() {
	echo pcibench_kdrv >"$SYS/$1/driver_override"
	echo "$1" >/sys/bus/pci/drivers_probe 2>/dev/null || true
	[ "$(driver_of "$1")" = pcibench_kdrv ] || fail "pcibench_kdrv did not bind $1: $(dmesg | tail -n 8)"
	[ -r "$DBG/pcibench_kdrv/$1/selftest" ] || fail "no $DBG/pcibench_kdrv/$1/selftest"
	ok "$1 bound to pcibench_kdrv: $(dmesg | grep -a "pcibench_kdrv $1:" | tail -n 1 | sed 's/.*: //')"
}

# irq_count NAME: the kernel's count of the interrupt lines named NAME in /proc/interrupts, summed over lines
# and CPUs.
irq_count() {
	awk -v n="$1" '$NF == n { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts
}

# callbacks OUT DIR: the completion callbacks the glue counted in direction DIR (h2c, c2h), all pairs.
callbacks() { awk -v d="$2" '$1 == "callbacks" && index($2, d) == 1 { split($2, kv, "="); s += kv[2] } END { print s + 0 }' "$1"; }

# kdrv_selftest ADDR OUT: run the glue's suite on ADDR (reading its selftest file) into OUT; every planned
# transfer must have run and passed.
kdrv_selftest() {
	cat "$DBG/pcibench_kdrv/$1/selftest" >"$2" || fail "reading the selftest of $1 failed"
	cat "$2"
	sum=$(grep '^summary ' "$2") || fail "the selftest printed no summary"
	! grep -q ' FAIL ' "$2" || fail "$(grep -c ' FAIL ' "$2") transfer(s) failed: $(grep ' FAIL ' "$2" | head -n 3)"
	planned=$(echo "$sum" | sed -n 's/.* planned=\([0-9]*\).*/\1/p')
	echo "$sum" | grep -q " failed=0 " && echo "$sum" | grep -q " passed=$planned " ||
		fail "selftest summary: $sum"
	ok "$1: all $planned transfers verified dmatest-style (the bytes written, the source unchanged, the guards before and after untouched)"
}

# kdrv_notes OUT: the throughput of the 1 MiB transfers, as note lines (TCG: only the order means something).
kdrv_notes() {
	awk '$3 == "size=1048576" && $7 == "pass" { sub("MB/s=", "", $9); printf "note: %s %s 1 MiB in %s: %s MB/s\n", $1, $2, $4, $9 }' "$1"
}

# kdrv_unbind ADDR: the glue lets go (channels released, the vendor's platform device removed, MSI-X freed).
kdrv_unbind() {
	echo "$1" >"$SYS/$1/driver/unbind"
	echo >"$SYS/$1/driver_override"
	[ -z "$(driver_of "$1")" ] || fail "$1 still bound after unbind"
	ok "$1 unbound: the vendor driver's platform device removed"
}

# kdrv_dmesg_clean: no error or warning from the vendor drivers, the glue, the DMA core or the kernel itself
# (levels 0-4 naming xdma, qdma, dma or pcibench_kdrv; any WARNING, BUG or Oops).
kdrv_dmesg_clean() {
	# (Loading the lab's modules taints the kernel, a level-4 line naming the first: expected, left out.)
	bad=$(dmesg -r | grep -aE '^<[0-4]>' | grep -av 'loading out-of-tree module taints kernel' |
		grep -aiE 'xdma|qdma|dma|pcibench_kdrv|regmap' || true)
	bad="$bad$(dmesg | grep -aE 'WARNING:|BUG:|Oops|Call Trace' || true)"
	[ -z "$bad" ] || fail "the kernel logged errors: $bad"
	ok "dmesg: no error or warning from xdma, amd-qdma, dmaengine, regmap or the glue"
}
