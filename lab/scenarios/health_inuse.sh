# pcibench health on the devices the running system uses (machine q35-inuse): a mounted ext4 disk and a NIC
# that is up, behind root ports with set link speeds, and every other function. health agrees with lspci on
# every link (the host compares each LnkCap and LnkSta, and lspci's "downgraded" with DEGRADED), keeps a
# --state with nothing changed between two runs, writes its Prometheus text with -o (the host parses it), sees
# the status registers as root and says "not readable" as a user, and takes nothing: every driver stays bound,
# the filesystem mounted, readable and writable, the NIC up with its address. Then a benchmark against lspci.
# machines: q35-inuse
# timeout: 150
. /lab/lib.sh
use_tools
inuse_modules

cleanup() {
	umount /mnt/data 2>/dev/null || true
	[ -z "${n:-}" ] || { ip addr flush dev "$n"; ip link set "$n" down; } 2>/dev/null || true
}
trap cleanup EXIT

vd=$(vd_by_serial data)
a=$(func_of "/sys/block/$vd")
mkdir -p /mnt/data
mount -t ext4 "/dev/$vd" /mnt/data
c=$(func_of "$(ls -d "$SYS"/*/virtio*/net | head -n 1)")
n=$(net_of "$c")
ip link set "$n" up
ip addr add 192.0.2.10/24 dev "$n"
ok "in use: ext4 on $vd ($a) mounted on /mnt/data, $n ($c) up with 192.0.2.10/24"
drivers() { for d in "$SYS"/*; do echo "$(basename "$d") $(driver_of "$(basename "$d")")"; done; }
drivers >/tmp/drivers.before

# Every function, as root: the status registers are readable.
rc=0
pcibench health --json --state /tmp/health.state >/tmp/health.json 2>/tmp/health.err || rc=$?
cat /tmp/health.err
case $rc in 0 | 1) ;; *) fail "health exit status $rc" ;; esac
grep -q '"device_status": null' /tmp/health.json && fail "root cannot read a Device Status"
ok "health as root: exit $rc, every function's status registers read"
emit health cat /tmp/health.json
# One lspci for every function (under TCG each lspci run costs a few hundred ms): the host compares.
emit lspci lspci -vvv -D
rc=0
pcibench health --state /tmp/health.state >/tmp/health.txt || rc=$?
cat /tmp/health.txt
case $rc in 0 | 1) ;; *) fail "second health exit status $rc" ;; esac
grep -q '^Changes since the previous run' /tmp/health.txt && grep -qx '  none' /tmp/health.txt ||
	fail "the second run does not say that nothing changed"
ok "a second run with --state: nothing changed"
grep -Eq "^$a .* virtio-pci " /tmp/health.txt || fail "the in-use disk $a is not in the table"
grep -Eq "^$c .* virtio-pci " /tmp/health.txt || fail "the in-use NIC $c is not in the table"
rc=0
pcibench health --format openmetrics -o /tmp/pcibench.prom || rc=$?
case $rc in 0 | 1) ;; *) fail "openmetrics exit status $rc" ;; esac
emit prom cat /tmp/pcibench.prom
ls -a /tmp | grep -q '\.pcibench\.prom\..*\.tmp' && fail "a temporary file is left beside the output"
ok "-o /tmp/pcibench.prom written, no temporary file left"

# As a user: 64 bytes of config space, so the status registers are "not readable", not zero.
rc=0
as_user pcibench health >/tmp/user.txt 2>&1 || rc=$?
cat /tmp/user.txt
case $rc in 0 | 1) ;; *) fail "health as a user: exit status $rc" ;; esac
grep -q '^Status bits not readable on ' /tmp/user.txt || fail "a user's run does not say the status bits are not readable"
ok "health as a user: exit $rc, status bits not readable"

# Nothing taken.
drivers >/tmp/drivers.after
cmp -s /tmp/drivers.before /tmp/drivers.after || { diff /tmp/drivers.before /tmp/drivers.after; fail "a driver binding changed"; }
ok "every function's driver binding is as before ($(grep -c ' [a-z]' /tmp/drivers.after) bound)"
check_unchanged "$a" virtio-pci /mnt/data
[ $(($(cat "/sys/class/net/$n/flags") & 1)) = 1 ] && ip addr show dev "$n" | grep -q 'inet 192.0.2.10/24' ||
	fail "$n is no longer up with its address"
ok "$n still up with its address"

# Benchmark: one health run against one lspci -vvv run, 3 of each (TCG: only the ratio means something).
ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
t0=$(ms)
for i in 1 2 3; do pcibench health >/dev/null || true; done
t1=$(ms)
for i in 1 2 3; do lspci -vvv >/dev/null; done
t2=$(ms)
for i in 1 2 3; do pcibench list >/dev/null; done
t3=$(ms)
for i in 1 2 3; do pcibench list --json >/dev/null; done
t4=$(ms)
for i in 1 2 3; do pcibench health --format openmetrics >/dev/null || true; done
t5=$(ms)
echo "note: list $(((t3 - t2) / 3)) ms, list --json $(((t4 - t3) / 3)) ms, health openmetrics $(((t5 - t4) / 3)) ms"
h=$(((t1 - t0) / 3)) l=$(((t2 - t1) / 3))
echo "note: health $h ms, lspci -vvv $l ms per run over $(ls "$SYS" | wc -l) functions (TCG): health/lspci = $(awk -v h="$h" -v l="$l" 'BEGIN { printf "%.2f", h / (l ? l : 1) }')"
