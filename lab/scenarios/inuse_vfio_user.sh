# A device bound to vfio-pci whose group another process holds open (a VM, another pcibench; here a shell holding
# /dev/vfio/noiommu-N) is in use: setup without --force refuses, doctor fails in-use naming the holder and offers
# nothing that takes the device, and pio, dma, latency and peek say who has it and never open the group a second
# time; the device stays bound and the holder keeps its descriptor. Released, the device is offered and opens
# again, and --release gives the disk back to virtio-pci with its first line intact.
# machines: q35-inuse
# timeout: 120
. /lab/lib.sh
use_tools
inuse_modules

r3=$(vd_by_serial raw3)
a3=$(func_of "/sys/block/$r3")
trap '[ -z "${hp:-}" ] || kill "$hp" 2>/dev/null; pcibench setup "$a3" --release >/dev/null 2>&1 || true' EXIT
expect_out 'bound it to vfio-pci' pcibench setup "$a3" --vfio
g=$(group_of "$a3")
node=/dev/vfio/noiommu-$g
[ -c "$node" ] || fail "no $node"

# The holder: a shell with the group open, waiting for a line on a FIFO (a read builtin: no child process).
mkfifo ctl
(
	exec 4<>"$node" 5<>ctl
	read -r _ <&5
) &
hp=$!
wait_fd "$hp" 4 "$node"
comm=$(cat "/proc/$hp/comm")
ok "PID $hp ($comm) holds $node open as fd 4"
busy="^pcibench: $a3 is in use: $node is held open by PID $hp \($comm\) for reading and writing: pcibench will not open it a second time; wait for it to finish, or stop it\$"
expect_err "$busy" pcibench pio "$a3" --allow-write
expect_err "$busy" pcibench latency "$a3"
expect_err "$busy" pcibench dma "$a3" --engine edu --allow-dma
expect_err "$busy" pcibench peek "$a3" 4 0
expect_err "^pcibench: refusing to set up $a3 for VFIO: the running system uses it: held open by PID $hp \($comm\) for reading and writing: $node; free it first \(stop PID $hp \($comm\), or have it close $node\) or choose another device; --force takes it anyway\$" pcibench setup "$a3" --vfio
expect_err "^pcibench: $a3 is in use: $node is held open by PID $hp \($comm\); stop it first" pcibench setup "$a3" --release
expect_rc 2 "^FAIL  in-use +in use by the running system: held open by PID $hp \($comm\) for reading and writing: $node\$" pcibench doctor "$a3"
offers_nothing_that_takes pcibench doctor "$a3"
offers_nothing_that_takes pcibench doctor "$a3" --json
[ "$(driver_of "$a3")" = vfio-pci ] || fail "$a3 is no longer bound to vfio-pci"
[ "$(readlink "/proc/$hp/fd/4")" = "$node" ] && kill -0 "$hp" || fail "PID $hp lost $node"
ok "$a3 still on vfio-pci, PID $hp still holds $node"

# Released: offered, and opened, again.
echo done >ctl
wait "$hp" 2>/dev/null || true
hp=
expect_rc "0 1" '^PASS  in-use +the running system does not use it' pcibench doctor "$a3"
expect_rc "0 1" '^recommended: vfio-noiommu: ready$' pcibench doctor "$a3"
expect_out "^$a3 BAR4\+0x0 = 0x[0-9a-f]{8}$" pcibench peek "$a3" 4 0
expect_out 'gave it back to virtio-pci' pcibench setup "$a3" --release
i=0
while ! r3=$(vd_by_serial raw3 2>/dev/null); do
	i=$((i + 1))
	[ "$i" -lt 100 ] || fail "raw3 did not come back on virtio-pci"
	sleep 0.1
done
[ "$(first_line "$r3")" = "$RAW raw3" ] || fail "$r3's first line is $(first_line "$r3")"
ok "$a3 back on virtio-pci, $r3 reads its first line"
