# pcibench info --json is one JSON document that agrees with the text output and with sysfs (host_check
# parses both), for edu and ivshmem-plain, unbound and (edu) bound to vfio-pci.
# machines: pc q35-iommu virt virt-smmuv3
. /lab/lib.sh
e=$(find_dev 1234:11e8)
i=$(find_dev 1af4:1110)
for dev in "edu $e" "ivshmem $i"; do
	set -- $dev
	emit "$1.text" pcibench info "$2"
	emit "$1.json" pcibench info "$2" --json
	emit "$1.resource" head -n 6 "$SYS/$2/resource"
	emit "$1.group" group_of "$2"
done
bind_vfio "$e"
emit edu_vfio.text pcibench info "$e"
emit edu_vfio.json pcibench info "$e" --json
emit edu_vfio.resource head -n 6 "$SYS/$e/resource"
emit edu_vfio.group group_of "$e"
unbind "$e"
