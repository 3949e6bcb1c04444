# The main job on the sim card, inside a guest whose CPU model (TCG) lacks AVX: the suite runs, picks copy routines
# this CPU has, verifies every row, and says the figures are simulated. XDMA DMA on the sim card both ways.
# machines: pc
# timeout: 180
. /lab/lib.sh
expect_out '^== DMA' pcibench run sim --total 2M
expect_out 'simulated card' pcibench pio sim --width all --size 64K --total 256K
expect_err 'no AVX' pcibench pio sim --width 256 --size 64K --total 64K
expect_out '^c2h +1184 KiB .* ok( ![a-z]+)*$' pcibench dma sim --engine xdma --total 4M
expect_out 'XDMA' pcibench info sim
