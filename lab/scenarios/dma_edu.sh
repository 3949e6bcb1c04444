# DMA with QEMU's edu engine, both ways, verified: VFIO type1 with IOVAs (q35-iommu, virt-smmuv3), no-IOMMU with
# physical addresses (pc, virt). Refusals: no --allow-dma, a buffer beyond the DMA width (before any DMA starts), an
# unprivileged user (no-IOMMU: the setcap line; type1: the group permission fix).
# machines: pc q35-iommu virt virt-smmuv3
# timeout: 120
. /lab/lib.sh
a=$(find_dev 1234:11e8)
trap 'unbind "$a"' EXIT
bind_vfio "$a"
case $LAB_VFIO in
noiommu) via=vfio-noiommu addr=physical ;;
*) via=vfio addr='IOVA' ;;
esac
# Hugepages for the buffers (physically contiguous for no-IOMMU).
echo 8 >/proc/sys/vm/nr_hugepages

expect_err 'add --allow-dma' pcibench dma "$a" --engine edu
expect_out "the card was given $addr" pcibench dma "$a" --engine edu --via "$via" --dma-bits 32 --total 8K --allow-dma
expect_out '^h2c +4095 B .* ok( ![a-z]+)*$' pcibench dma "$a" --engine edu --dma-bits 32 --total 8K --allow-dma
expect_out '^c2h +1 KiB .* ok( ![a-z]+)*$' pcibench dma "$a" --engine edu --dir c2h --size 1K --card-addr 0x40800 --dma-bits 32 --total 2K --allow-dma
expect_out 'card-to-host DMA timing for 2 transfers of 4095 bytes' pcibench dma "$a" --engine edu --dma-bits 32 --total 8K --allow-dma --format seed
# No PCI device drives fewer than 24 address bits: a usage error before anything is opened.
expect_rc 2 '24 to 64 address bits' pcibench dma "$a" --engine edu --dma-bits 16 --total 8K --allow-dma
if [ "$LAB_VFIO" = noiommu ]; then
	# Physical hugepages sit above 16 MiB (x86: outside ZONE_DMA; arm64 virt: RAM starts at 1 GiB), so a
	# 24-bit engine cannot reach them: refused before any DMA starts. (With an IOMMU the IOVA is allocated
	# within reach instead.)
	expect_err 'beyond|above|outside|below' pcibench dma "$a" --engine edu --dma-bits 24 --total 8K --allow-dma
fi
expect_err 'does not fit the edu engine' pcibench dma "$a" --engine edu --size 4096 --dma-bits 32 --allow-dma
expect_err 'has no xdma engine' pcibench dma "$a" --engine xdma --allow-dma

g=$(group_of "$a")
if [ "$LAB_VFIO" = noiommu ]; then
	chmod 666 "/dev/vfio/noiommu-$g"
	expect_err 'setcap cap_sys_rawio=ep /.*pcibench' as_user pcibench dma "$a" --engine edu --dma-bits 32 --allow-dma
else
	expect_err "setup $a --vfio|/dev/vfio/$g" as_user pcibench dma "$a" --engine edu --dma-bits 32 --allow-dma
fi
