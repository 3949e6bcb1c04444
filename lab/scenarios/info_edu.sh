# pcibench info on edu: one BAR, BAR0 1 MiB memory 32-bit non-prefetchable at the address sysfs has,
# resource0 and no resource0_wc; no driver bound. The unprivileged user sees the BAR too.
# machines: pc q35-iommu virt virt-smmuv3
. /lab/lib.sh
e=$(find_dev 1234:11e8)
bar0='^ *BAR0: 0x[0-9a-f]+ size 1 MiB \(0x100000\) memory 32-bit non-prefetchable files: resource0$'
expect_out "$bar0" pcibench info "$e"
expect_out '^ *Driver: +none$' pcibench info "$e"
out=$(pcibench info "$e")
[ "$(echo "$out" | grep -c '^ *BAR[0-9]:')" = 1 ] || fail "edu should have exactly one BAR"
ok "one BAR"
echo "$out" | grep -q resource0_wc && fail "resource0_wc listed for a non-prefetchable BAR"
ok "no resource0_wc"
start=$(echo "$out" | sed -n 's/^ *BAR0: \(0x[0-9a-f]*\) .*/\1/p')
[ $((start)) = $(($(bar_start "$e" 0))) ] || fail "BAR0 at $start, sysfs says $(bar_start "$e" 0)"
ok "BAR0 start $start matches sysfs"
expect_out "$bar0" as_user pcibench info "$e"
