# Benchmark, one per guest: on ivshmem BAR2 (sysfs, uc), every copy routine this CPU has against memcpy, 256 KiB
# transfers both ways, all verified; prints, per direction, the best routine's median over memcpy's. Under TCG
# only this ratio means something, not the MB/s (x86-64: SSE2 loops vs glibc's memcpy; aarch64: NEON LDR/STR Q
# vs glibc's).
# machines: pc virt-smmuv3
# timeout: 120
. /lab/lib.sh
a=$(find_dev 1af4:1110)
mem_enable "$a"
out=$(pcibench pio "$a" --bar 2 --map uc --dir both --width all --size 256K --total 32M --allow-write)
printf '%s\n' "$out"
# Table rows: BAR map dir width size unit xfers min mean median max cv% limit eff verify [flags]. Under TCG the
# rows are often flagged !noisy; the medians are still what the ratio compares.
printf '%s\n' "$out" | awk -v arch="$(uname -m)" '
	$2 == "uc" && ($3 == "h2c" || $3 == "c2h") {
		verified = 0
		for (i = 12; i <= NF; i++) if ($i == "ok") verified = 1
		if (!verified) next
		if ($4 == "memcpy") mc[$3] = $10
		else if ($10 > best[$3]) { best[$3] = $10; bw[$3] = $4 }
	}
	END {
		for (d in mc) {
			if (!(d in best) || mc[d] <= 0) exit 1
			printf "note: %s %s: best routine --width %s at %.2fx memcpy (median %.1f vs %.1f MB/s, TCG)\n",
				arch, d, bw[d], best[d] / mc[d], best[d], mc[d]
			n++
		}
		exit n != 2
	}' || fail "no verified rows for memcpy and another routine in both directions"
