# In-kernel users that claim nothing, and network namespaces only a mount or a descriptor keeps (issue 54): a raw
# disk exported by nvmet's block backend on tcp 127.0.0.1:4420, read back through the kernel's NVMe/TCP host; an ext4
# disk carrying nvmet's file backend, a swap file and a loop file, then lazily unmounted under an open file (only the
# exclusive probe sees that); a NIC up with an address in a namespace kept by a bind mount outside /run/netns, by one
# in another process's mount namespace, by a descriptor. Each: doctor fails in-use naming the user, offering nothing
# that takes it; setup --vfio and pio --allow-write refuse, changing nothing; the user keeps working; released, the
# device is offered again.
# machines: q35-inuse
# timeout: 180
. /lab/lib.sh
use_tools
inuse_modules
inuse_modules_extra nvmet nvmet-tcp nvme-fabrics nvme-tcp

CFS=/sys/kernel/config
NQN=nqn.2024-01.org.pcibench.lab:raw1
FNQN=nqn.2024-01.org.pcibench.lab:file
cleanup() {
	for p in ${np:-} ${fp:-} ${mp:-} ${hp:-}; do kill "$p" 2>/dev/null || true; done
	[ -z "${host_ctrl:-}" ] || echo 1 >"/sys/class/nvme/$host_ctrl/delete_controller" 2>/dev/null || true
	for s in "$NQN" "$FNQN"; do
		rm -f "$CFS/nvmet/ports/1/subsystems/$s" 2>/dev/null || true
		for n in "$CFS/nvmet/subsystems/$s"/namespaces/*; do
			[ -d "$n" ] || continue
			echo 0 >"$n/enable" 2>/dev/null || true
			rmdir "$n" 2>/dev/null || true
		done
		rmdir "$CFS/nvmet/subsystems/$s" 2>/dev/null || true
	done
	rmdir "$CFS/nvmet/ports/1" 2>/dev/null || true
	[ -z "${loopdev:-}" ] || losetup -d "$loopdev" 2>/dev/null || true
	swapoff /mnt/data/swapfile 2>/dev/null || true
	umount /mnt/data 2>/dev/null || true
	umount /run/docker/netns/lab 2>/dev/null || true
}
trap cleanup EXIT

grep -q " $CFS " /proc/mounts || mount -t configfs none "$CFS"

# 1. A raw disk exported by nvmet's block backend, on a TCP port on 127.0.0.1, read through NVMe/TCP.
r1=$(vd_by_serial raw1)
a1=$(func_of "/sys/block/$r1")
ip link set lo up
S=$CFS/nvmet/subsystems/$NQN
mkdir "$S"
echo 1 >"$S/attr_allow_any_host"
mkdir "$S/namespaces/1"
echo "/dev/$r1" >"$S/namespaces/1/device_path"
echo 1 >"$S/namespaces/1/enable"
P=$CFS/nvmet/ports/1
mkdir "$P"
echo tcp >"$P/addr_trtype"
echo ipv4 >"$P/addr_adrfam"
echo 127.0.0.1 >"$P/addr_traddr"
echo 4420 >"$P/addr_trsvcid"
ln -s "$S" "$P/subsystems/$NQN"
[ -z "$(ls "/sys/block/$r1/holders")" ] || fail "nvmet made a holders/ link on $r1: this tests nothing new"
echo "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=$NQN" >/dev/nvme-fabrics || fail "NVMe/TCP connect to $NQN"
i=0
host_ctrl=
while [ -z "$host_ctrl" ]; do
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$NQN" ] && host_ctrl=$(basename "$c")
	done
	i=$((i + 1))
	[ "$i" -lt 200 ] || fail "no NVMe/TCP controller for $NQN"
	sleep 0.05
done
fab=
i=0
while [ -z "$fab" ]; do
	fab=$(nvme_head "$host_ctrl")
	i=$((i + 1))
	[ "$i" -lt 200 ] || fail "no namespace on $host_ctrl"
	sleep 0.05
done
[ "$(first_line "$fab")" = "$RAW raw1" ] || fail "/dev/$fab does not read $r1's first line"
ok "$r1 ($a1) exported by nvmet as namespace 1 of $NQN on tcp 127.0.0.1:4420, read back through /dev/$fab"
refused "$a1" virtio-pci ".*nvmet \(the kernel's NVMe over Fabrics target\) exports $r1 as namespace 1 of subsystem $NQN \(port 1: tcp 127\.0\.0\.1:4420\)"
expect_rc 2 "^  then: echo 0 > /sys/kernel/config/nvmet/subsystems/$NQN/namespaces/1/enable\$" pcibench doctor "$a1"
[ "$(cat "$S/namespaces/1/enable")" = 1 ] || fail "nvmet's namespace was disabled"
[ "$(first_line "$fab")" = "$RAW raw1" ] || fail "the export no longer reads back"
ok "nvmet still exports $r1, read back through /dev/$fab"
echo 1 >"/sys/class/nvme/$host_ctrl/delete_controller"
host_ctrl=
rm "$P/subsystems/$NQN"
echo 0 >"$S/namespaces/1/enable"
rmdir "$S/namespaces/1"
offered "$a1"

# 2. An ext4 disk carrying a file nvmet exports, an active swap file and a loop device's backing file.
vd=$(vd_by_serial data)
a=$(func_of "/sys/block/$vd")
mkdir -p /mnt/data
mount -t ext4 "/dev/$vd" /mnt/data
dd if=/dev/zero of=/mnt/data/lun.img bs=1M count=1 2>/dev/null
printf 'lun on the data disk\n' | dd of=/mnt/data/lun.img conv=notrunc 2>/dev/null
F=$CFS/nvmet/subsystems/$FNQN
mkdir "$F"
mkdir "$F/namespaces/2"
echo /mnt/data/lun.img >"$F/namespaces/2/device_path"
echo 1 >"$F/namespaces/2/enable"
dd if=/dev/zero of=/mnt/data/swapfile bs=1M count=4 2>/dev/null
chmod 600 /mnt/data/swapfile
mkswap /mnt/data/swapfile >/dev/null
swapon /mnt/data/swapfile || fail "swapon /mnt/data/swapfile"
printf 'loop on the data disk\n' >/mnt/data/loop.img
dd if=/dev/zero of=/mnt/data/loop.img bs=1k seek=1 count=1023 2>/dev/null
loopdev=$(losetup -f)
losetup "$loopdev" /mnt/data/loop.img || fail "losetup $loopdev /mnt/data/loop.img"
lo=$(basename "$loopdev")
ok "$vd ($a) mounted on /mnt/data, carrying nvmet's /mnt/data/lun.img, swap file /mnt/data/swapfile, $lo's backing file"
refused "$a" virtio-pci ".*nvmet \(the kernel's NVMe over Fabrics target\) exports file /mnt/data/lun\.img on $vd as namespace 2 of subsystem $FNQN"
expect_rc 2 "^FAIL  in-use +.*it backs active swap file /mnt/data/swapfile through $vd" pcibench doctor "$a"
expect_rc 2 "^FAIL  in-use +.*it carries $lo \(backing file /mnt/data/loop\.img\) on $vd, which the loop driver keeps open" pcibench doctor "$a"
# What frees it, in an order that works: each user of the filesystem before its unmount.
out=$(pcibench doctor "$a" 2>&1 | sed -n 's/^  then: //p')
printf '%s\n' "$out"
[ "$(printf '%s\n' "$out" | tail -n 1)" = "umount /mnt/data" ] || fail "umount /mnt/data is not the last step"
printf '%s\n' "$out" | grep -qx "swapoff /mnt/data/swapfile" || fail "no swapoff step"
printf '%s\n' "$out" | grep -qx "losetup -d /dev/$lo" || fail "no losetup -d step"
printf '%s\n' "$out" | grep -qx "echo 0 > /sys/kernel/config/nvmet/subsystems/$FNQN/namespaces/2/enable" || fail "no nvmet step"
check_unchanged "$a" virtio-pci /mnt/data
grep -q "^/mnt/data/swapfile " /proc/swaps || fail "the swap file is no longer active"
[ "$(cat "$F/namespaces/2/enable")" = 1 ] || fail "nvmet's file namespace was disabled"
[ "$(first_line "$lo")" = "loop on the data disk" ] || fail "$lo no longer reads its backing file"
ok "swap file active, nvmet's file namespace enabled, $lo reading its backing file"
printf '%s\n' "$out" >/tmp/steps
while read -r step; do sh -c "$step" || fail "freeing step failed: $step"; done </tmp/steps
loopdev=
rmdir "$F/namespaces/2"
offered "$a"

# 2b. The same filesystem lazily unmounted while a process keeps a file of it open: no mount left anywhere, no
# device node held, yet ext4 still claims the disk; only the exclusive probe sees it.
mount -t ext4 "/dev/$vd" /mnt/data
sh -c 'exec 3</mnt/data/hello.txt; exec sleep 1000' &
hp=$!
wait_comm "$hp" sleep
umount -l /mnt/data
grep -q " /mnt/data " /proc/mounts && fail "/mnt/data is still mounted"
ok "$vd's filesystem detached (umount -l), kept alive by PID $hp's open file"
refused "$a" virtio-pci ".*$vd is held exclusively by the kernel \(a mount in another namespace, a storage target export, \.\.\.\)"
[ "$(cat "/proc/$hp/fd/3" | head -n 1)" = "$HELLO" ] || fail "PID $hp can no longer read its file"
ok "PID $hp still reads its file"
kill "$hp"
wait "$hp" 2>/dev/null || true
offered "$a"

# 3. A NIC in a network namespace kept only by a bind mount outside /run/netns.
c=$(func_of "$(ls -d "$SYS"/*/virtio*/net | head -n 1)")
n=$(net_of "$c")
[ -n "$n" ] || fail "no interface on $c"
mkdir -p /run/docker/netns
touch /run/docker/netns/lab
unshare --net=/run/docker/netns/lab true || fail "unshare --net=/run/docker/netns/lab"
nsenter --net=/run/docker/netns/lab sleep 1000 &
np=$!
wait_comm "$np" sleep
ip link set "$n" netns "$np" || fail "ip link set $n netns $np"
kill "$np"
wait "$np" 2>/dev/null || true
np=
nsenter --net=/run/docker/netns/lab ip link set "$n" up
nsenter --net=/run/docker/netns/lab ip addr add 192.0.2.22/24 dev "$n"
ok "$n up with 192.0.2.22/24 in the namespace mounted on /run/docker/netns/lab, which no process is in"
refused "$c" virtio-pci ".*$n is up with 192\.0\.2\.22/24 in the network namespace mounted on /run/docker/netns/lab"
expect_rc 2 "^  then: nsenter --net=/run/docker/netns/lab ip link set $n down\$" pcibench doctor "$c"
nsenter --net=/run/docker/netns/lab ip addr show dev "$n" | grep -q "inet 192.0.2.22/24" || fail "$n lost its address"
ok "$n still up with its address"
umount /run/docker/netns/lab
back_here "$c"
offered "$c"

# 4. The same in a namespace kept only by a bind mount inside another process's private mount namespace.
unshare --net sleep 1000 &
np=$!
wait_comm "$np" sleep
ip link set "$n" netns "$np" || fail "ip link set $n netns $np"
nsenter -t "$np" -n ip link set "$n" up
nsenter -t "$np" -n ip addr add 192.0.2.23/24 dev "$n"
unshare -m --propagation private sh -c "touch /run/hidden-ns && mount --bind /proc/$np/ns/net /run/hidden-ns && exec sleep 1000" &
mp=$!
wait_comm "$mp" sleep
kill "$np"
wait "$np" 2>/dev/null || true
np=
grep -q " /run/hidden-ns " /proc/mounts && fail "/run/hidden-ns is mounted here too: this tests nothing new"
comm=$(cat "/proc/$mp/comm")
ok "$n up with 192.0.2.23/24 in a namespace mounted on /run/hidden-ns only in PID $mp's mount namespace"
refused "$c" virtio-pci ".*$n is up with 192\.0\.2\.23/24 in the network namespace mounted on /run/hidden-ns in the mount namespace of PID $mp \($comm\)"
expect_rc 2 "^  then: nsenter --net=/proc/$mp/root/run/hidden-ns ip link set $n down\$" pcibench doctor "$c"
nsenter --net="/proc/$mp/root/run/hidden-ns" ip addr show dev "$n" | grep -q "inet 192.0.2.23/24" || fail "$n lost its address"
ok "$n still up with its address"
kill "$mp"
wait "$mp" 2>/dev/null || true
mp=
back_here "$c"
offered "$c"

# 5. The same in a namespace kept only by a descriptor of a process in this namespace.
unshare --net sleep 1000 &
np=$!
wait_comm "$np" sleep
ip link set "$n" netns "$np" || fail "ip link set $n netns $np"
nsenter -t "$np" -n ip link set "$n" up
nsenter -t "$np" -n ip addr add 192.0.2.24/24 dev "$n"
sh -c "exec 7</proc/$np/ns/net; exec sleep 1000" &
fp=$!
wait_comm "$fp" sleep
kill "$np"
wait "$np" 2>/dev/null || true
np=
readlink "/proc/$fp/fd/7" | grep -q '^net:\[' || fail "PID $fp holds no namespace as fd 7"
ok "$n up with 192.0.2.24/24 in a namespace only PID $fp's descriptor 7 keeps"
comm=$(cat "/proc/$fp/comm")
refused "$c" virtio-pci ".*$n is up with 192\.0\.2\.24/24 in the network namespace PID $fp \($comm\) holds open as descriptor 7"
expect_rc 2 "^  then: nsenter --net=/proc/$fp/fd/7 ip link set $n down\$" pcibench doctor "$c"
nsenter --net="/proc/$fp/fd/7" ip addr show dev "$n" | grep -q "inet 192.0.2.24/24" || fail "$n lost its address"
ok "$n still up with its address"
kill "$fp"
wait "$fp" 2>/dev/null || true
fp=
back_here "$c"
offered "$c"
