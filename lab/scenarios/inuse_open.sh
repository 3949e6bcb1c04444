# A raw virtio disk the running system still uses with no filesystem and no holders/ link on it is never taken:
# a loop device whose backing file is the disk itself (losetup: /sys/block/loopN/loop/backing_file names it, the
# kernel makes no holders/ link), and a process holding another raw disk open for reading and writing (a
# database on a raw device, a VM's disk). For each, setup refuses (non-zero, nothing changed) naming the holder
# and what frees it, doctor fails in-use without offering a command that would take the device, and the holder
# keeps working: the loop device reads the disk's known first line, the process writes through its descriptor
# and the disk has its words. Released, the device is offered again.
# machines: q35-inuse
# timeout: 120
. /lab/lib.sh
use_tools
inuse_modules

cleanup() {
	losetup -d /dev/loop7 2>/dev/null || true
	[ -z "${hp:-}" ] || kill "$hp" 2>/dev/null || true
}
trap cleanup EXIT

# A loop device backed by the raw disk itself.
r1=$(vd_by_serial raw1)
a1=$(func_of "/sys/block/$r1")
echo "raw disk $r1 on $a1 ($(driver_of "$a1"))"
[ "$(first_line "$r1")" = "$RAW raw1" ] || fail "$r1 does not start with its known line"
losetup /dev/loop7 "/dev/$r1"
[ "$(cat /sys/block/loop7/loop/backing_file)" = "/dev/$r1" ] ||
	fail "loop7's backing file reads $(cat /sys/block/loop7/loop/backing_file)"
[ -z "$(ls "/sys/block/$r1/holders")" ] || fail "the kernel made a holders/ link for loop7: this tests nothing new"
ok "loop7 backed by /dev/$r1, no holders/ link on $r1"
expect_err "^pcibench: refusing to unbind $a1 from virtio-pci: the running system uses it: it carries loop7 \(backing file /dev/$r1\) on $r1, which the loop driver keeps open; free it first \(losetup -d /dev/loop7\) or choose another device; --force takes it anyway\$" pcibench setup "$a1" --vfio
check_unchanged "$a1" virtio-pci
[ "$(first_line loop7)" = "$RAW raw1" ] || fail "loop7 no longer reads $r1"
ok "loop7 still reads $r1's first line"
expect_err "^pcibench: refusing to give user the BARs of $a1: the running system uses it: it carries loop7 " pcibench setup "$a1" --sysfs-user user
check_unchanged "$a1" virtio-pci
expect_rc 2 "^FAIL  in-use +in use by the running system: it carries loop7 \(backing file /dev/$r1\) on $r1, which the loop driver keeps open\$" pcibench doctor "$a1"
expect_rc 2 '^  then: losetup -d /dev/loop7$' pcibench doctor "$a1"
offers_nothing_that_takes pcibench doctor "$a1"
offers_nothing_that_takes pcibench doctor "$a1" --json
[ "$(first_line loop7)" = "$RAW raw1" ] || fail "loop7 no longer reads $r1"
ok "loop7 still reads $r1's first line"
losetup -d /dev/loop7
expect_rc "1 2" '^PASS  in-use +the running system does not use it' pcibench doctor "$a1"
expect_rc 2 "^  run: sudo pcibench setup $a1 --vfio\$" pcibench doctor "$a1"

# A process holding another raw disk open for reading and writing; it writes a line through the descriptor
# each time one arrives on a FIFO (a read builtin: no child process shares the descriptor).
r2=$(vd_by_serial raw2)
a2=$(func_of "/sys/block/$r2")
echo "raw disk $r2 on $a2 ($(driver_of "$a2"))"
mkfifo ctl
(
	exec 3<>"/dev/$r2" 4<>ctl
	while read -r l <&4; do printf '%s\n' "$l" >&3 || exit 1; done
) &
hp=$!
wait_fd "$hp" 3 "/dev/$r2"
comm=$(cat "/proc/$hp/comm")
ok "PID $hp ($comm) holds /dev/$r2 open as fd 3"
expect_err "^pcibench: refusing to unbind $a2 from virtio-pci: the running system uses it: held open by PID $hp \($comm\) for reading and writing: /dev/$r2; free it first \(stop PID $hp \($comm\), or have it close /dev/$r2\) or choose another device; --force takes it anyway\$" pcibench setup "$a2" --vfio
check_unchanged "$a2" virtio-pci
expect_rc 2 "^FAIL  in-use +in use by the running system: held open by PID $hp \($comm\) for reading and writing: /dev/$r2\$" pcibench doctor "$a2"
expect_rc 2 "^  then: stop PID $hp \($comm\), or have it close /dev/$r2\$" pcibench doctor "$a2"
offers_nothing_that_takes pcibench doctor "$a2"
expect_err "^pcibench: $a2 is bound to driver virtio-pci and the running system uses it \(held open by PID $hp \($comm\) for reading and writing: /dev/$r2\): pcibench will not touch its BARs; pick another device\$" pcibench pio "$a2" --allow-write
check_unchanged "$a2" virtio-pci
# The holder still works: it writes through its descriptor, and the disk has the words.
said="written by PID $hp after pcibench refused"
echo "$said" >ctl
i=0
while [ "$(first_line "$r2")" != "$said" ]; do
	i=$((i + 1))
	[ "$i" -lt 100 ] || fail "PID $hp's write did not reach /dev/$r2 (first line: $(first_line "$r2"))"
	sleep 0.05
done
[ "$(readlink "/proc/$hp/fd/3")" = "/dev/$r2" ] || fail "PID $hp lost its descriptor"
ok "PID $hp still has /dev/$r2 as fd 3 and wrote through it: $(first_line "$r2")"

# Released: offered again.
kill "$hp"
wait "$hp" 2>/dev/null || true
hp=
expect_rc "1 2" '^PASS  in-use +the running system does not use it' pcibench doctor "$a2"
expect_rc 2 "^  run: sudo pcibench setup $a2 --vfio\$" pcibench doctor "$a2"
