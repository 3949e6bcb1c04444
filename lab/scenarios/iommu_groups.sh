# pcibench info shows the IOMMU group sysfs has: on q35-iommu every device has one; on pc none has until
# vfio-pci binds edu into a no-IOMMU group, which pcibench then shows.
# machines: pc q35-iommu
. /lab/lib.sh
check_group() { # ADDR GROUP: text and JSON show GROUP
	expect_out "^ *IOMMU group: +$2\$" pcibench info "$1"
	expect_out "\"iommu_group\": $2," pcibench info "$1" --json
}

e=$(find_dev 1234:11e8)
i=$(find_dev 1af4:1110)
case $LAB_MACHINE in
q35-iommu)
	for a in "$e" "$i"; do check_group "$a" "$(group_of "$a")"; done
	;;
pc)
	for a in "$e" "$i"; do
		expect_out '^ *IOMMU group: +none' pcibench info "$a"
		expect_out '"iommu_group": null,' pcibench info "$a" --json
	done
	bind_vfio "$e"
	check_group "$e" "$(group_of "$e")"
	unbind "$e"
	;;
esac
