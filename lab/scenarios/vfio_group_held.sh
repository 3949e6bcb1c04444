# A VFIO type1 group another process holds open (/dev/vfio/N behind the vIOMMU; here a shell) is named by the node's
# device number: peek refuses before opening the group, doctor fails in-use naming the holder; released, edu opens.
# (inuse_vfio_user does the same on q35-inuse for a no-IOMMU group, with every measuring command.)
# machines: q35-iommu
. /lab/lib.sh
a=$(find_dev 1234:11e8)
trap '[ -z "${hp:-}" ] || kill "$hp" 2>/dev/null; unbind "$a"' EXIT
bind_vfio "$a"
node=/dev/vfio/$(group_of "$a")
[ -c "$node" ] || fail "no $node"
mkfifo ctl
(
	exec 4<>"$node" 5<>ctl
	read -r _ <&5
) &
hp=$!
i=0
while [ "$(readlink "/proc/$hp/fd/4")" != "$node" ]; do
	i=$((i + 1))
	[ "$i" -lt 100 ] || fail "PID $hp did not open $node"
	sleep 0.05
done
comm=$(cat "/proc/$hp/comm")
expect_err "^pcibench: $a is in use: $node is held open by PID $hp \($comm\) for reading and writing: pcibench will not open it a second time; wait for it to finish, or stop it\$" pcibench peek "$a" 0 0
expect_rc 2 "^FAIL  in-use +in use by the running system: held open by PID $hp \($comm\) for reading and writing: $node\$" pcibench doctor "$a"
echo done >ctl
wait "$hp" 2>/dev/null || true
hp=
expect_out "^$a BAR0\+0x0 = 0x[0-9a-f]{8}\$" pcibench peek "$a" 0 0
