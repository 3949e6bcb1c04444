# An SR-IOV physical function is in use while one of its virtual functions is: unbinding the PF's driver
# disables SR-IOV and removes the VFs (drivers/pci/iov.c). QEMU's NVMe controller with one VF, bound to nvme:
# with the VF enabled but unbound the PF is free; with the VF bound to vfio-pci (as a VM gets it) setup refuses
# the PF naming the VF, doctor fails in-use and offers nothing that takes it, and a process holding the VF's group
# is named too; the VF stays bound. Released and SR-IOV disabled, the PF is offered again.
# machines: q35-inuse
# timeout: 120
. /lab/lib.sh
use_tools

ctrl=$(nvme_by_serial sriovpf)
a=$(func_of "/sys/class/nvme/$ctrl")
echo "NVMe $ctrl at $a ($(driver_of "$a")), SR-IOV total VFs $(cat "$SYS/$a/sriov_totalvfs")"
cleanup() {
	[ -z "${hp:-}" ] || kill "$hp" 2>/dev/null || true
	[ -z "${vf:-}" ] || pcibench setup "$vf" --release >/dev/null 2>&1 || true
	echo 0 >"$SYS/$a/sriov_numvfs" 2>/dev/null || true
}
trap cleanup EXIT
# No driver probes the VF (the emulated VF has no queues until an admin command gives it some).
echo 0 >"$SYS/$a/sriov_drivers_autoprobe"
echo 1 >"$SYS/$a/sriov_numvfs"
vf=$(basename "$(readlink -f "$SYS/$a/virtfn0")")
[ -n "$vf" ] && [ -d "$SYS/$vf" ] || fail "no VF after sriov_numvfs=1"
ok "VF $vf enabled (virtfn0), driver '$(driver_of "$vf")'"
expect_rc "1 2" '^PASS  in-use +the running system does not use it' pcibench doctor "$a"

# The VF bound to vfio-pci.
expect_out 'bound it to vfio-pci' pcibench setup "$vf" --vfio
why="its SR-IOV virtual function $vf \(virtfn0\) is bound to vfio-pci; taking $a from its driver removes its virtual function"
free="echo 0 \| sudo tee /sys/bus/pci/devices/$a/sriov_numvfs \(removes its virtual functions\)"
expect_err "^pcibench: refusing to unbind $a from nvme: the running system uses it: $why; free it first \($free\) or choose another device; --force takes it anyway\$" pcibench setup "$a" --vfio
check_unchanged "$a" nvme
[ "$(driver_of "$vf")" = vfio-pci ] && [ "$(cat "$SYS/$a/sriov_numvfs")" = 1 ] || fail "the VF changed"
ok "$vf still on vfio-pci, sriov_numvfs still 1"
expect_rc 2 "^FAIL  in-use +in use by the running system: $why\$" pcibench doctor "$a"
expect_rc 2 "^  then: $free\$" pcibench doctor "$a"
offers_nothing_that_takes pcibench doctor "$a"

# A process holding the VF's group: named as the VF's use.
node=/dev/vfio/noiommu-$(group_of "$vf")
mkfifo ctl
(
	exec 4<>"$node" 5<>ctl
	read -r _ <&5
) &
hp=$!
wait_fd "$hp" 4 "$node"
comm=$(cat "/proc/$hp/comm")
expect_rc 2 "^FAIL  in-use +in use by the running system: its SR-IOV virtual function $vf \(virtfn0\) is bound to vfio-pci, held open by PID $hp \($comm\) for reading and writing: $node; taking $a from its driver removes its virtual function\$" pcibench doctor "$a"
offers_nothing_that_takes pcibench doctor "$a"
echo done >ctl
wait "$hp" 2>/dev/null || true
hp=

# Released, SR-IOV disabled: the PF is offered again.
expect_out 'unbound it from vfio-pci' pcibench setup "$vf" --release
vf=
echo 0 >"$SYS/$a/sriov_numvfs"
expect_rc "1 2" '^PASS  in-use +the running system does not use it' pcibench doctor "$a"
expect_rc 2 "^  run: sudo pcibench setup $a --vfio\$" pcibench doctor "$a"
