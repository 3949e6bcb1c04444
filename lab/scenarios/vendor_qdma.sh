# AMD's own QDMA driver (Linux 6.12 drivers/dma/amd/qdma/) drives the served `sim-qdma` card, built as the Versal
# CPM5 whose register layout the driver writes: lab/kmod's glue registers the driver's `amd-qdma` platform device
# with the config BAR and MSI-X vectors (the error vector, two interrupt aggregation rings), the driver takes two
# memory-mapped queues each way, and the dmatest-style suite runs on both (64 B .. 1 MiB, odd sizes and offsets,
# scatter lists), every completion an entry in an interrupt ring and its vector; no error interrupt. The boot fails
# on any model violation serve logs (host/served.sh served_logs).
# machines: q35-vu612
# timeout: 180
. /lab/lib.sh
. /lab/served.sh
. /lab/kdrv.sh
kdrv_load
a=$(served sim-qdma)
kdrv_bind "$a"
q0=$(irq_count amd-qdma-queue) e0=$(irq_count amd-qdma-error)
kdrv_selftest "$a" selftest.out
q=$(($(irq_count amd-qdma-queue) - q0)) e=$(($(irq_count amd-qdma-error) - e0))
n=$(($(callbacks selftest.out h2c) + $(callbacks selftest.out c2h)))
# One transfer at a time: each completion writes one ring entry, and the ring raises its vector once the driver's
# CIDX update has caught up with the entries before it (qdma.c qdma_queue_isr).
[ "$q" = "$n" ] || fail "interrupts: $q on the amd-qdma-queue vectors, $n completion callbacks"
[ "$e" = 0 ] || fail "$e error interrupt(s) (amd-qdma-error): $(dmesg | grep -a 'global error' | tail -n 2)"
ok "MSI-X: $q interrupt-ring interrupts, one per completed transfer; no error interrupt"
kdrv_notes selftest.out
kdrv_unbind "$a"
kdrv_dmesg_clean
