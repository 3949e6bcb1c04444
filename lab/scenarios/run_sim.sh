# The main job on the sim card, inside guests whose CPUs lack some routines (x86-64 under TCG: no AVX; aarch64:
# NEON only, and no x86-only routines): the suite runs, picks copy routines this CPU has, verifies every row, and
# says the figures are simulated; the missing widths are refused in one line naming what to use. XDMA DMA on the
# sim card both ways.
# machines: pc virt-smmuv3
# timeout: 180
. /lab/lib.sh
expect_out '^== DMA' pcibench run sim --total 2M
expect_out 'simulated card' pcibench pio sim --width all --size 64K --total 256K
case $(uname -m) in
aarch64)
	expect_out '^ +0 uc +h2c 128 .* ok( ![a-z]+)*$' pcibench pio sim --bar 0 --map uc --width 128 --size 64K --total 256K
	expect_err '^pcibench: aarch64 loads and stores at most 128 bits per register .*; try --width 128$' \
		pcibench pio sim --width 256 --size 64K --total 64K
	expect_err '^pcibench: nt128 is x86-64 only \(MOVNTDQ .*unavailable on aarch64; try --width 128$' \
		pcibench pio sim --width nt128 --size 64K --total 64K
	expect_err '^pcibench: movdir64b is x86-64 only .*; try --width 128$' pcibench pio sim --width movdir64b --size 64K --total 64K
	;;
*)
	expect_err 'no AVX' pcibench pio sim --width 256 --size 64K --total 64K
	;;
esac
expect_out '^c2h +1184 KiB .* ok( ![a-z]+)*$' pcibench dma sim --engine xdma --total 4M
expect_out 'XDMA' pcibench info sim
