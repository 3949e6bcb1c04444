# The umem driver (Micro Memory MM-5425CN, seed 001's card) on the sim-nvram card inside a guest (TCG, a real
# kernel): info shows the CSR block (1 GiB, batteries, ECC), DMA both ways verifies at sizes up to what the
# guest's memory holds (two host buffers and the touched card memory: the model's 1 GiB is not charged until
# written), --format seed prints fpga_sio's block, and bad input is one line.
# machines: pc virt-smmuv3
# timeout: 300
. /lab/lib.sh
expect_out 'umem: MM-5425CN NVRAM DMA engine in BAR0, magic 0x5c' pcibench info sim-nvram
expect_out 'memory: +1 GiB \(size code 0xf0\)' pcibench info sim-nvram
avail=$(awk '/^MemAvailable:/ { print $2 * 1024 }' /proc/meminfo)
max=$((1 << 20))
while [ $((max * 8)) -le "$avail" ]; do max=$((max * 2)); done
echo "MemAvailable $avail bytes: sizes up to $max"
expect_out "^c2h +$((max >> 20)) MiB .* ok( ![a-z]+)*\$" pcibench dma sim-nvram --engine umem --size 4K..$max --total $((max * 2))
expect_out "host-to-card DMA timing for 4 transfers of $max bytes" pcibench dma sim-nvram --size $max --total $((max * 4)) --format seed
expect_out '^Test pattern pass$' pcibench dma sim-nvram --size $max --total $((max * 4)) --format seed
expect_rc 2 'does not fit the umem engine.s card memory' pcibench dma sim-nvram --engine umem --size 2G
expect_rc 2 'multiple of 8' pcibench dma sim-nvram --engine umem --size 12 --total 48
expect_rc 2 '^pcibench: --channel does not apply to the umem engine' pcibench dma sim-nvram --channel 1
