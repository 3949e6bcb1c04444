# pcibench info says what lspci -vvv says (Debian's, from the tools disk, with the host's pci.ids) of every
# function: the subsystem in lspci's words ("Red Hat, Inc. Device 1100" where pci.ids names no subsystem,
# the device's name where the subsystem ids are its own), and the expansion ROM ("Expansion ROM at ADDR
# [disabled] [size=64K]"): virtio-net on rp4 carries a 48 KiB ROM file, a 64 KiB ROM BAR the firmware
# assigns and leaves disabled; the other functions have none, and pcibench shows none.
# machines: q35-inuse
# timeout: 120
. /lab/lib.sh
use_tools
subs=0 roms=0
for d in $(ls "$SYS"); do
	l=$(lspci -vvv -s "$d" 2>/dev/null)
	i=$(pcibench info "$d" 2>/dev/null) || fail "pcibench info $d failed"
	want=$(printf '%s\n' "$l" | sed -n 's/^\tSubsystem: //p')
	got=$(printf '%s\n' "$i" | sed -n 's/^  Subsystem:     \(.*\) \[[0-9a-f]\{4\}:[0-9a-f]\{4\}\]$/\1/p')
	if [ -n "$want" ]; then
		[ "$got" = "$want" ] || fail "$d: pcibench's subsystem is '$got', lspci's '$want'"
		subs=$((subs + 1))
	fi
	sub=$got
	want=$(printf '%s\n' "$l" | sed -n 's/^\tExpansion ROM at /Expansion ROM at /p')
	got=$(printf '%s\n' "$i" | sed -n 's/^  Expansion ROM at /Expansion ROM at /p')
	[ "$got" = "$want" ] || fail "$d: pcibench says '${got:-no ROM}', lspci '${want:-no ROM}'"
	echo "$d: subsystem '${sub:-none}'${want:+; $want}"
	[ -z "$want" ] || roms=$((roms + 1))
done
[ "$subs" -ge 5 ] || fail "only $subs functions have a Subsystem line in lspci -vvv"
[ "$roms" -ge 1 ] || fail "no expansion ROM found (virtio-net on rp4 has one)"
ok "info agrees with lspci -vvv on $subs subsystems and $roms expansion ROM(s)"
