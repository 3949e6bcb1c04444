# pcibench latency on the real kernel: MMIO read latency of edu's registers and ivshmem's BARs over sysfs,
# then edu bound to vfio-pci (type1 on q35-iommu and virt-smmuv3, no-IOMMU on pc and virt): DMA latency both
# ways by polling and by MSI (VFIO eventfd), and edu's register read under edu DMA load. The host side checks
# the JSON: every histogram's counts, percentiles in order, each transfer verified, neither polling nor the MSI
# faster than the engine's own completion (edu's 100 ms timer; each MSI sample also checks edu's command register
# is idle when the interrupt arrives), the load's throughput beside each row under load.
# machines: pc q35-iommu virt virt-smmuv3
# timeout: 120
. /lab/lib.sh
e=$(find_dev 1234:11e8)
i=$(find_dev 1af4:1110)
trap 'unbind "$e"' EXIT
mem_enable "$e"
mem_enable "$i"

# sysfs, reads only: edu's identification register at 32 and 64 bits (edu answers 64-bit reads below 0x80 with
# all-ones, and the row says so; it does not decode 8 or 16-bit accesses: on aarch64 those are external aborts,
# SIGBUS, which is why 32 bits is the default), ivshmem's registers (BAR0) and its memory (BAR2).
emit edu_mmio pcibench latency "$e" --offset 0 --width 32 --width 64 --samples 2000 --json
# A 64-byte read needs AVX-512F, which neither TCG's x86 CPU model nor aarch64 has: refused in one line.
expect_rc 1 'no AVX-512F|at most 128 bits' pcibench latency "$e" --width 512
expect_out '^mmio-read +0 +0x0 +32 c2h .* unverified$' pcibench latency "$e" --width 32 --samples 500
emit ivshmem_mmio pcibench latency "$i" --bar 2 --offset 0x1000 --width 32 --width 64 --samples 2000 --allow-write --json
expect_out '^mmio-read +0 +0x8 +32 ' pcibench latency "$i" --bar 0 --offset 8 --width 32 --samples 500
# Options that do not apply are refused in one line (exit 2): no interrupts over sysfs.
expect_rc 2 'DMA is not available through sysfs' pcibench latency "$e" --irq --allow-dma
expect_rc 2 '--format seed prints the QDMA benchmark' pcibench latency "$e" --format seed

bind_vfio "$e"
echo 8 >/proc/sys/vm/nr_hugepages
expect_rc 1 'add --allow-dma' pcibench latency "$e" --dma --dma-bits 32
# Poll and MSI, both directions, two sizes: 4 samples each (edu takes ~100 ms a transfer).
emit edu_dma pcibench latency "$e" --width 32 --samples 500 --dma --irq --size 64,4095 --dma-samples 4 --dma-bits 32 --allow-dma --json
# The same as a table: polling and the MSI side by side.
expect_out '^dma irq +- +- +- h2c +64 B idle +2 ' pcibench latency "$e" --width 32 --samples 1000 --dma --irq --size 64 --dma-samples 2 --dma-bits 32 --allow-dma
# The register read idle and under edu DMA each way and both (alternating: edu runs one transfer at a time).
emit edu_load pcibench latency "$e" --width 32 --samples 2000 --load all --dma-bits 32 --allow-dma --json
expect_out '^\| yes +\| [0-9.]+ +\| 0 ' pcibench latency "$e" --width 32 --samples 500 --load h2c --dma-bits 32 --allow-dma --format seed
