# PIO on ivshmem BAR2 (1 MiB, 64-bit prefetchable, backed by the host's /dev/shm file): sysfs uc, wc and
# wc-flush, the syscall path and the mmap path through VFIO (type1 on q35-iommu, no-IOMMU on pc). The host checks
# every row verified and that the file holds exactly the last pattern the guest wrote.
# machines: pc q35-iommu
# timeout: 240
. /lab/lib.sh
a=$(find_dev 1af4:1110)
trap 'unbind "$a"' EXIT
echo "@@ADDR $a"

# sysfs: every mapping, two widths (TCG's CPU model has SSE2 but no AVX).
emit sysfs pcibench pio "$a" --bar 2 --map all --width 64 --width 128 --size 256K --total 1M --allow-write --json
expect_out 'wc-flush h2c 128 +256 KiB .* ok( ![a-z]+)*$' pcibench pio "$a" --bar 2 --map wc-flush --width 128 --size 256K --total 512K --allow-write
expect_out 'Min = [0-9.]+ \(Mbytes/sec\)' pcibench pio "$a" --bar 2 --map wc --size 64K --total 128K --allow-write --format seed
# Without consent the writes are skipped, never made.
expect_out 'skipped: host-to-card writes need --allow-write' pcibench pio "$a" --bar 2 --map uc --size 4K --total 8K

via=vfio
[ "$LAB_VFIO" = noiommu ] && via=vfio-noiommu
bind_vfio "$a"
# One pread/pwrite per access (seed 002's slow path), then mmap last: its pattern is what the host must find.
emit syscall pcibench pio "$a" --bar 2 --via "$via" --io syscall --map uc --width 64 --size 16K --total 64K --allow-write --json
emit vfio pcibench pio "$a" --bar 2 --via "$via" --map all --width 64 --size 256K --total 1M --allow-write --json
