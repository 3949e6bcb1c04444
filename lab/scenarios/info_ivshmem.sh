# pcibench info on ivshmem-plain: BAR0 256 B registers; BAR2 1 MiB memory 64-bit prefetchable with
# resource2 and resource2_wc, at the address sysfs has.
# machines: pc q35-iommu virt virt-smmuv3
. /lab/lib.sh
i=$(find_dev 1af4:1110)
bar2='^ *BAR2: 0x[0-9a-f]+ size 1 MiB \(0x100000\) memory 64-bit prefetchable files: resource2 resource2_wc$'
expect_out "$bar2" pcibench info "$i"
expect_out '^ *BAR0: 0x[0-9a-f]+ size 256 B \(0x100\) memory 32-bit non-prefetchable files: resource0$' \
	pcibench info "$i"
out=$(pcibench info "$i")
start=$(echo "$out" | sed -n 's/^ *BAR2: \(0x[0-9a-f]*\) .*/\1/p')
[ $((start)) = $(($(bar_start "$i" 2))) ] || fail "BAR2 at $start, sysfs says $(bar_start "$i" 2)"
ok "BAR2 start $start matches sysfs"
