# AMD's own XDMA driver (Linux 6.12 drivers/dma/xilinx/xdma.c) drives the served `sim` card: lab/kmod's glue binds
# the function, registers the driver's `xdma` platform device with the card's DMA BAR and MSI-X vectors (the mgb4
# pattern) and runs a dmatest-style suite through the dmaengine slave API both ways (64 B .. 1 MiB, odd sizes and
# offsets, scatter lists of several segments), every completion the driver's own MSI-X interrupt; the boot fails
# on any model violation serve logs (host/served.sh served_logs).
# machines: q35-vu612
# timeout: 180
. /lab/lib.sh
. /lab/served.sh
. /lab/kdrv.sh
kdrv_load
a=$(served sim)
kdrv_bind "$a"
h0=$(irq_count xdma-h2c-channel) c0=$(irq_count xdma-c2h-channel)
kdrv_selftest "$a" selftest.out
h=$(($(irq_count xdma-h2c-channel) - h0)) c=$(($(irq_count xdma-c2h-channel) - c0))
# xdma.c completes a transfer (of up to 4096 descriptors) in its channel's interrupt handler: one interrupt each.
[ "$h" = "$(callbacks selftest.out h2c)" ] && [ "$c" = "$(callbacks selftest.out c2h)" ] ||
	fail "interrupts: H2C $h, C2H $c in /proc/interrupts, callbacks $(callbacks selftest.out h2c) and $(callbacks selftest.out c2h)"
ok "MSI-X: $h H2C and $c C2H channel interrupts, one per completed transfer"
kdrv_notes selftest.out
kdrv_unbind "$a"
kdrv_dmesg_clean
