# peek/poke on edu BAR0 through sysfs, then VFIO (type1 on q35-iommu and virt-smmuv3, no-IOMMU on pc and virt): the ID register
# (0x010000ed) and the liveness register (reads back ~written); refusals: WC on a non-prefetchable BAR, a write
# without --allow-write, an offset past the BAR, an unprivileged user, and a device a kernel driver owns.
# machines: pc q35-iommu virt virt-smmuv3
# timeout: 90
. /lab/lib.sh
a=$(find_dev 1234:11e8)
trap 'unbind "$a"' EXIT
[ -z "$(driver_of "$a")" ] || fail "$a is bound to $(driver_of "$a") at boot"
mem_enable "$a"

# sysfs (no driver bound).
expect_out "^$a BAR0\\+0x0 = 0x010000ed\$" pcibench peek "$a" 0 0
expect_out "<- 0x12345678\$" pcibench poke "$a" 0 4 0x12345678 --allow-write
expect_out "^$a BAR0\\+0x4 = 0xedcba987\$" pcibench peek "$a" 0 4
expect_out "^$a BAR0\\+0x0 = 0x010000ed\$" pcibench peek "$a" 0 0 --width 32
expect_err 'add --allow-write' pcibench poke "$a" 0 4 1
expect_err 'past the end of BAR0' pcibench peek "$a" 0 0x100000
expect_err 'not aligned' pcibench peek "$a" 0 2
expect_err 'write-combining is unavailable for BAR0.*non-prefetchable' pcibench pio "$a" --bar 0 --map wc --size 4K --total 4K --allow-write
expect_err 'setup .* --sysfs-user' as_user pcibench peek "$a" 0 0

# VFIO.
via=vfio
[ "$LAB_VFIO" = noiommu ] && via=vfio-noiommu
bind_vfio "$a"
expect_out "^$a BAR0\\+0x0 = 0x010000ed\$" pcibench peek "$a" 0 0
expect_out "^$a BAR0\\+0x0 = 0x010000ed\$" pcibench peek "$a" 0 0 --via "$via"
expect_out "<- 0xa5a5a5a5\$" pcibench poke "$a" 0 4 0xa5a5a5a5 --allow-write --via "$via"
expect_out "= 0x5a5a5a5a\$" pcibench peek "$a" 0 4
expect_err 'VFIO.*uncached' pcibench pio "$a" --bar 0 --via "$via" --map wc --size 4K --total 4K --allow-write
expect_err 'bound to vfio-pci' pcibench peek "$a" 0 0 --via sysfs

# A kernel driver owns it: refused, and the message names the driver and the unbind.
bind_uio "$a"
expect_err 'bound to driver uio_pci_generic.*(unbind|setup)' pcibench peek "$a" 0 0
expect_err 'bound to driver uio_pci_generic' pcibench pio "$a" --bar 0 --dir c2h --size 4K --total 4K
