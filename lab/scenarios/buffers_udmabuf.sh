# machines: pc q35-iommu virt virt-smmuv3
# timeout: 180
# CPU access to DMA buffers against the real kernel (seed 003's test): Linux's /dev/udmabuf (a dma-buf of a
# sealed memfd, the module built by the lab) with DMA_BUF_IOCTL_SYNC around each access, heap and hugepages,
# and the VFIO-mapped (q35-iommu) or physical no-IOMMU (pc) buffers pcibench gives edu; every read-back
# verified. Also the bad inputs, each one line.
. /lab/lib.sh
# The kernel's complaints (if any) must not mix into the output the host parses; dmesg keeps them.
echo 1 >/proc/sys/kernel/printk

[ -c /dev/udmabuf ] || fail "/dev/udmabuf missing: the udmabuf module did not load"
echo 8 >/proc/sys/vm/nr_hugepages
expect_out 'compare = ok' pcibench buffers --buffer udmabuf --size 4M --format seed
pcibench buffers --buffer udmabuf --buffer heap --buffer hugepage --size 2M --width 64 --width memcpy --json >buffers.json
emit buffers cat buffers.json
# The explicit-sync parts of a dma-buf access cost something; coherent heap memory has no sync at all.
expect_out '^  mmap sync +memcpy +write' pcibench buffers --buffer udmabuf --size 1M
# Sync cost against size: the same access at 64 KiB and 16 MiB (the module's default limit is 64 MiB).
for s in 64K 16M; do
	expect_out "^  mmap sync +memcpy +read +$(echo $s | sed 's/K/ KiB/; s/M/ MiB/')" pcibench buffers --buffer udmabuf --size $s --total 64M
	emit "sync$s" pcibench buffers --buffer udmabuf --size $s --total 64M --width memcpy --json
done

# The buffers pcibench gives a device, measured from the CPU side.
e=$(find_dev 1234:11e8)
bind_vfio "$e"
via=vfio-mapped
[ "$LAB_VFIO" = noiommu ] && via='locked'
expect_out "^$via" pcibench buffers --device "$e" --buffer device --size 2M
expect_out '^  mmap coherent memcpy +read +2 MiB .* ok' pcibench buffers --device "$e" --buffer device --size 2M

# Bad input: one clear line each, nothing measured.
expect_err 'whole pages' pcibench buffers --buffer udmabuf --size 1000
expect_err 'size_limit_mb' pcibench buffers --buffer udmabuf --size 128M
expect_err 'no u-dma-buf named nosuch' pcibench buffers --buffer u-dma-buf:nosuch
chmod 600 /dev/udmabuf
expect_err 'chmod o\+rw /dev/udmabuf' as_user pcibench buffers --buffer udmabuf --size 1M
# Nothing the kernel disliked along the way (bad page-cache accounting, oopses).
if dmesg | grep -E 'BUG|Oops|WARNING'; then fail "the kernel logged the above during the buffer tests"; fi
ok "no kernel BUG/Oops/WARNING in dmesg"
