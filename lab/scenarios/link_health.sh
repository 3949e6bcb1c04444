# machines: q35-pcie
# timeout: 150
# Link health during a run, against the real kernel's AER counters: edu sits behind a PCIe root port; while edu
# DMA runs, the host injects two non-fatal AER errors into the root port from QEMU's monitor (link_health.host).
# The row measured during the injection is marked suspect with the right count; the next row is clean.
# Also: --cpu pins the measuring thread (in the report and in the thread's affinity), and a device without a
# PCIe link shows no limit or efficiency, saying why.
. /lab/lib.sh

e=$(find_dev 1234:11e8)
port=$(basename "$(dirname "$(readlink -f "$SYS/$e")")")
ok "edu $e behind root port $port"
[ "$(cat "$SYS/$port/current_link_speed")" = "8.0 GT/s PCIe" ] || fail "root port speed $(cat "$SYS/$port/current_link_speed")"

# Pinning: the report says so, and the kernel's view of the thread agrees while it runs.
expect_out 'ran on CPU 1 \(pinned' pcibench pio sim --bar 2 --size 64K --total 4M --cpu 1
pcibench dma sim --total 4G --cpu 1 >/dev/null 2>&1 &
pid=$!
sleep 2
allowed=$(grep Cpus_allowed_list "/proc/$pid/status" | awk '{print $2}')
kill -INT "$pid" 2>/dev/null || true
wait "$pid" || true
[ "$allowed" = 1 ] || fail "pcibench --cpu 1 runs on CPUs '$allowed'"
ok "the measuring thread's affinity is CPU $allowed"
expect_err 'not available' pcibench pio sim --cpu 7 --total 1M

bind_vfio "$e"
# The kernel logs each AER error on the console: keep it off the output the host parses (dmesg keeps it).
echo 1 >/proc/sys/kernel/printk
# The cue for the host side: inject now, while the h2c row runs (each edu transfer takes ~100 ms).
echo "@@HOST inject"
pcibench dma "$e" --engine edu --dma-bits 32 --size 4095 --total 160K --allow-dma --json --save saved.json >dma.json
emit dma cat dma.json
# The saved run keeps the whole run's link-health changes beside its rows (issue 14).
emit saved cat saved.json
expect_out 'reports no PCIe link' pcibench dma "$e" --engine edu --dma-bits 32 --dir c2h --size 1K --total 2K --allow-dma
