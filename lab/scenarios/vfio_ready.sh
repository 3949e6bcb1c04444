# VFIO is ready for scenarios: /dev/vfio/vfio exists, no device is bound at boot, binding edu to vfio-pci
# makes its group node appear (noiommu-N on pc, N behind the vIOMMU on q35-iommu and virt-smmuv3), unbinding
# releases it.
# machines: pc q35-iommu virt virt-smmuv3
. /lab/lib.sh
[ -c /dev/vfio/vfio ] || fail "/dev/vfio/vfio missing"
ok "/dev/vfio/vfio exists"
a=$(find_dev 1234:11e8)
echo "edu at $a"
[ -z "$(driver_of "$a")" ] || fail "$a is bound to $(driver_of "$a") at boot"
ok "$a has no driver at boot"
case $LAB_VFIO in
noiommu)
	[ -z "$(ls /sys/class/iommu)" ] || fail "$LAB_MACHINE has an IOMMU: $(ls /sys/class/iommu)"
	[ ! -e "$SYS/$a/iommu_group" ] || fail "$a has an IOMMU group before binding"
	ok "no IOMMU, no group before binding"
	;;
type1)
	[ -n "$(ls /sys/class/iommu)" ] || fail "no IOMMU in /sys/class/iommu"
	# virt-smmuv3 (device tree): the group appears when a driver binds (see iommu_groups.sh).
	[ -e "$SYS/$a/iommu_group" ] || [ "$LAB_MACHINE" = virt-smmuv3 ] || fail "$a has no IOMMU group"
	ok "IOMMU $(ls /sys/class/iommu), $a in group $(group_of "$a")"
	;;
*) fail "unknown LAB_VFIO '$LAB_VFIO'" ;;
esac
bind_vfio "$a"
g=$(group_of "$a")
if [ "$LAB_VFIO" = noiommu ]; then node=/dev/vfio/noiommu-$g; else node=/dev/vfio/$g; fi
[ -c "$node" ] || fail "$node missing (have: $(ls /dev/vfio))"
ok "$node exists"
unbind "$a"
[ -z "$(driver_of "$a")" ] || fail "$a still bound after unbind"
ok "$a unbound"
