# No-IOMMU DMA from memory reserved on the kernel command line (--buffer reserved:START,SIZE, seed 001's way
# with memmap=2050M$4G): the pc guest boots with memmap=64M$0x10000000 (lab/run), /proc/iomem lists it
# Reserved, and edu moves data both ways through it, verified, at its physical address (below edu's 32-bit
# DMA mask). Refusals, each one line before any DMA: a System RAM range, an unreserved range, an unaligned
# range (usage, exit 2), one beyond the DMA width; behind an IOMMU (q35-iommu) the option is refused in one line.
# machines: pc q35-iommu
# timeout: 180
. /lab/lib.sh
a=$(find_dev 1234:11e8)
trap 'unbind "$a"' EXIT
bind_vfio "$a"
if [ "$LAB_VFIO" = type1 ]; then
	expect_rc 1 '^pcibench: --buffer reserved is for no-IOMMU runs .*use --buffer heap or hugepage' \
		pcibench dma "$a" --engine edu --buffer reserved:0x10000000,64M --dma-bits 32 --total 8K --allow-dma
	exit 0
fi
expect_out '^10000000-13ffffff : Reserved' cat /proc/iomem
r=reserved:0x10000000,64M
expect_out 'buffer: reserved memory \(memmap=\) at physical 0x10000000; the card was given physical addresses' \
	pcibench dma "$a" --engine edu --buffer "$r" --dma-bits 32 --total 8K --allow-dma
expect_out '^h2c +4095 B .* ok( ![a-z]+)*$' pcibench dma "$a" --engine edu --buffer "$r" --dma-bits 32 --total 8K --allow-dma
expect_out '^c2h +2 KiB .* ok( ![a-z]+)*$' pcibench dma "$a" --engine edu --buffer "$r" --dir c2h --size 2K --dma-bits 32 --total 4K --allow-dma
expect_out 'card-to-host DMA timing for 2 transfers of 4095 bytes' \
	pcibench dma "$a" --engine edu --buffer "$r" --dma-bits 32 --total 8K --allow-dma --format seed
# System RAM (16 MiB, inside 0x100000-0xfffffff): the kernel allocates from it.
expect_rc 1 '^pcibench: 0x1000000-0x10fffff \(1 MiB\) is System RAM .* memmap=1M\$0x1000000' \
	pcibench dma "$a" --engine edu --buffer reserved:0x1000000,1M --dma-bits 32 --total 8K --allow-dma
# Past the guest's RAM: nothing reserved there.
expect_rc 1 '^pcibench: 0x30000000-0x300fffff \(1 MiB\) is (in no /proc/iomem range|not inside one Reserved range).*memmap=1M\$0x30000000' \
	pcibench dma "$a" --engine edu --buffer reserved:0x30000000,1M --dma-bits 32 --total 8K --allow-dma
# Half in the reservation, half in RAM after it.
expect_rc 1 'System RAM' pcibench dma "$a" --engine edu --buffer reserved:0x13f00000,2M --dma-bits 32 --total 8K --allow-dma
expect_rc 2 '^pcibench: --buffer reserved:0x10000800,64K: START 0x10000800 and SIZE 0x10000 must both be multiples of the 4096-byte page' \
	pcibench dma "$a" --engine edu --buffer reserved:0x10000800,64K --dma-bits 32 --total 8K --allow-dma
# edu's DMA mask is 32 bits here; a 28-bit device could not reach 0x10000000-0x13ffffff.
expect_rc 1 'above the device.s 28-bit DMA reach' pcibench dma "$a" --engine edu --buffer "$r" --dma-bits 28 --total 8K --allow-dma
expect_rc 2 'simulated card' pcibench dma sim-nvram --buffer "$r"
# doctor, asked about a transfer the free hugepages cannot hold twice, names this way out.
echo 4 >/proc/sys/vm/nr_hugepages
expect_rc "1 2" 'run dma with --buffer reserved:0x100000000,512M' pcibench doctor "$a" --size 256M
echo 0 >/proc/sys/vm/nr_hugepages
