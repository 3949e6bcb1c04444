# pcibench memtest and dma --duration on edu through VFIO (type1 with IOVAs, no-IOMMU with physical addresses):
# memtest fills edu's buffer (the 4095 bytes QEMU 7.2 takes in one transfer) with each address and its complement,
# reads it back and checks it, then markers at every power of two, and finds it answering at its whole size; a soak
# of edu's one engine gives a row per interval, each checked, says its stream ran between looks, and ends with no
# errors. Both refuse without --allow-dma.
# machines: q35-iommu pc
# timeout: 300
. /lab/lib.sh
a=$(find_dev 1234:11e8)
trap 'unbind "$a"' EXIT
bind_vfio "$a"
# Hugepages for the buffers (physically contiguous for no-IOMMU).
echo 8 >/proc/sys/vm/nr_hugepages

expect_err 'add --allow-dma' pcibench memtest "$a" --engine edu
expect_out 'the memory answers at its whole 4095 B' pcibench memtest "$a" --engine edu --dma-bits 32 --allow-dma
expect_out '^aliasing pass: each of [0-9]+ markers' pcibench memtest "$a" --engine edu --dma-bits 32 --size 2K --allow-dma
expect_err 'add --allow-dma' pcibench dma "$a" --engine edu --dir h2c --duration 2s
expect_out '^errors: none' pcibench dma "$a" --engine edu --dir h2c --duration 3s --every 1s --dma-bits 32 --allow-dma
expect_out 'between the others' pcibench dma "$a" --engine edu --dir c2h --duration 2s --every 1s --dma-bits 32 --allow-dma
