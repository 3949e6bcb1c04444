# setup --vfio and --release on each served card, on the guest's real kernel: bound to vfio-pci behind the vIOMMU
# (q35-vu: type1, a group of its own; QEMU maps the guest's IOVAs through it with DMA_MAP) and in no-IOMMU mode
# (q35-vu-noiommu), the group node there, doctor then recommending that path as ready; --release puts each back
# to no driver, and a second --release changes nothing.
# machines: q35-vu q35-vu-noiommu
# timeout: 150
. /lab/lib.sh
. /lab/served.sh
via=$(via_of)
prefix=
[ "$LAB_VFIO" = noiommu ] && prefix=noiommu-
trap 'for c in $SERVED_CARDS; do pcibench setup "$(served "$c")" --release >/dev/null 2>&1 || true; done' EXIT
for c in $SERVED_CARDS; do
	a=$(served "$c")
	[ -z "$(driver_of "$a")" ] || fail "$c ($a) is bound to $(driver_of "$a") at boot"
	expect_out 'bound it to vfio-pci' pcibench setup "$a" --vfio
	[ "$(driver_of "$a")" = vfio-pci ] || fail "$c: not bound to vfio-pci after setup --vfio"
	node=/dev/vfio/$prefix$(group_of "$a")
	[ -c "$node" ] || fail "$c: $node missing (have: $(ls /dev/vfio))"
	ok "$c ($a) bound to vfio-pci, $node"
	expect_rc "0 1" "^recommended: $via: ready\$" pcibench doctor "$a"
done
for c in $SERVED_CARDS; do
	a=$(served "$c")
	expect_out . pcibench setup "$a" --release
	[ -z "$(driver_of "$a")" ] || fail "$c: still bound to $(driver_of "$a") after --release"
	expect_out . pcibench setup "$a" --release
	ok "$c released: no driver"
done
