# pcibench info shows the IOMMU group sysfs has: behind q35's intel-iommu (ACPI DMAR) every device has one from
# boot; behind virt's SMMUv3 (device tree) a device joins the SMMU, and so gets a group, only when a driver probes
# it (of_dma_configure -> of_iommu_configure in really_probe), so edu has one once vfio-pci binds it; on pc none
# has until vfio-pci binds edu into a no-IOMMU group. pcibench shows each.
# machines: pc q35-iommu virt virt-smmuv3
. /lab/lib.sh
check_group() { # ADDR GROUP: text and JSON show GROUP
	expect_out "^ *IOMMU group: +$2\$" pcibench info "$1"
	expect_out "\"iommu_group\": $2," pcibench info "$1" --json
}

e=$(find_dev 1234:11e8)
i=$(find_dev 1af4:1110)
case $LAB_VFIO in
type1)
	for a in "$e" "$i"; do
		g=$(group_of "$a")
		if [ -n "$g" ]; then
			check_group "$a" "$g"
		elif [ "$LAB_MACHINE" = virt-smmuv3 ]; then
			expect_out '^ *IOMMU group: +none' pcibench info "$a"
		else
			fail "$a has no IOMMU group on $LAB_MACHINE"
		fi
	done
	bind_vfio "$e"
	[ -n "$(group_of "$e")" ] || fail "$e bound to vfio-pci but in no IOMMU group"
	check_group "$e" "$(group_of "$e")"
	unbind "$e"
	;;
noiommu)
	for a in "$e" "$i"; do
		expect_out '^ *IOMMU group: +none' pcibench info "$a"
		expect_out '"iommu_group": null,' pcibench info "$a" --json
	done
	bind_vfio "$e"
	check_group "$e" "$(group_of "$e")"
	unbind "$e"
	;;
*) fail "unknown LAB_VFIO '$LAB_VFIO'" ;;
esac
