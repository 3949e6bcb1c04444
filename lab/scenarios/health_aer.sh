# pcibench health --state across AER errors the kernel really counts: edu sits behind root port 0000:00:01.0
# (machine q35-pcie, 8 GT/s x4); a first run keeps the state, a second sees nothing changed, then the host
# injects two non-fatal errors (Completer Abort) into the root port from QEMU's monitor (health_aer.host). The
# next run names them as a change with the kernel's counter name, exits 2 (failure), and the run after it is
# back to no change.
# machines: q35-pcie
# timeout: 90
. /lab/lib.sh

port=0000:00:01.0
e=$(find_dev 1234:11e8)
[ "$(basename "$(dirname "$(readlink -f "$SYS/$e")")")" = "$port" ] || fail "edu $e is not behind $port"
[ -f "$SYS/$port/aer_dev_nonfatal" ] || fail "$port has no AER counters in sysfs"
nonfatal() { sed -n 's/^TOTAL_ERR_NONFATAL //p' "$SYS/$port/aer_dev_nonfatal"; }
before=$(nonfatal)

expect_rc "0 1" 'no previous run in /tmp/h.state' pcibench health --state /tmp/h.state
expect_rc "0 1" '^  none$' pcibench health --state /tmp/h.state
# The kernel logs each AER error on the console: keep it off the output (dmesg keeps it).
echo 1 >/proc/sys/kernel/printk
echo "@@HOST inject"
counted() { [ "$(nonfatal)" -ge $((before + 2)) ]; }
wait_until 30 "the root port's non-fatal count to grow by 2 from $before" counted
ok "the kernel counted 2 non-fatal errors on $port"
expect_rc 2 "^  FAIL  2 non-fatal errors \(2 CmpltAbrt\) on $port\$" pcibench health --state /tmp/h.state
expect_rc "0 1" '^  none$' pcibench health --state /tmp/h.state
# The same injected errors in the Prometheus text: the root port's CmpltAbrt counter.
rc=0
pcibench health --format openmetrics >/tmp/h.prom || rc=$?
grep "^pcibench_aer_errors_total{device=\"$port\",.*kind=\"CmpltAbrt\"} $((before + 2))\$" /tmp/h.prom ||
	fail "no CmpltAbrt count of $((before + 2)) for $port in the Prometheus text"
ok "pcibench_aer_errors_total counts them"
[ -z "$(driver_of "$e")" ] || fail "edu got bound to $(driver_of "$e")"
