# machines: q35-pcie
# timeout: 150
# Link health during a run, against the real kernel's AER counters: edu sits behind a PCIe root port; while edu
# DMA runs, the host injects two non-fatal AER errors into the root port from QEMU's monitor (link_health.host),
# while the guest holds the run inside its h2c row until the kernel has counted them (no timed hand-off).
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
# The run is long (4 GiB): wait for the pinning itself, however slowly the guest starts the program.
pcibench dma sim --total 4G --cpu 1 >/dev/null 2>&1 &
pid=$!
allowed() { grep Cpus_allowed_list "/proc/$pid/status" 2>/dev/null | awk '{print $2}'; }
pinned() { [ "$(allowed)" = 1 ] || ! kill -0 "$pid" 2>/dev/null; }
wait_until 60 "pcibench --cpu 1 pinning its measuring thread (CPUs '$(allowed)')" pinned
allowed=$(allowed)
kill -INT "$pid" 2>/dev/null || true
wait "$pid" || true
[ "$allowed" = 1 ] || fail "pcibench --cpu 1 runs on CPUs '$allowed' (or ended before pinning)"
ok "the measuring thread's affinity is CPU $allowed"
expect_err 'not available' pcibench pio sim --cpu 7 --total 1M

# No IOMMU here: DMA buffers must be memory that cannot move (issue 36 M5): hugepages, as dma_edu reserves them.
echo 8 >/proc/sys/vm/nr_hugepages
bind_vfio "$e"
# The kernel logs each AER error on the console: keep it off the output the host parses (dmesg keeps it).
echo 1 >/proc/sys/kernel/printk
nonfatal() { sed -n 's/^TOTAL_ERR_NONFATAL //p' "$SYS/$port/aer_dev_nonfatal"; }
before=$(nonfatal)
# The hand-off is an event protocol, not a timing guess (issue 34): the run goes h2c then c2h, each row from the
# untimed placing of its data and guards on the card to the check after its samples; once its trace shows the
# first h2c DMA command (edu's 0x98 written with start, RAM to device: 0x1; device to RAM is 0x3), the run is held
# with SIGSTOP inside the h2c row, the host is cued, and the run goes on only after the kernel has counted both
# injected errors. However the guest, the host or their loads are scheduled, the errors land in the h2c row.
pcibench dma "$e" --engine edu --dma-bits 32 --size 4095 --total 160K --allow-dma --json --save saved.json \
	--trace trace.jsonl >dma.json 2>dma.err &
pid=$!
# DMA commands started so far in direction $1 (0x1 or 0x3): writes of 0x98 (the engine's status reads repeat it).
started() { grep '"ev":"write"' trace.jsonl 2>/dev/null | grep -c "\"off\":\"0x98\",\"w\":32,\"v\":\"$1\""; }
h2c_started() { [ "$(started 0x1)" -ge 1 ] || ! kill -0 "$pid" 2>/dev/null; }
wait_until 60 "the first h2c DMA command in the trace" h2c_started
kill -STOP "$pid" || fail "pcibench dma ended before its h2c row started: $(cat dma.err)"
h2c=$(started 0x1)
# No c2h command yet; the host checks that fewer h2c transfers had started than the row has, so the row (and its
# link-health snapshot after it) was not over when the errors came.
[ "$(started 0x3)" = 0 ] || fail "the run was held only after its h2c row"
echo "$h2c" >held.txt
ok "pcibench dma held inside its h2c row after $h2c DMA command(s)"
echo "@@HOST inject"
counted() { [ "$(nonfatal)" -ge $((before + 2)) ]; }
wait_until 60 "the root port's non-fatal count to grow by 2 from $before" counted
kill -CONT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 0 ] || fail "pcibench dma exited $rc: $(cat dma.err)"
ok "the kernel counted both errors inside the h2c row; the run went on"
emit dma cat dma.json
emit held cat held.txt
# The saved run keeps the whole run's link-health changes beside its rows (issue 14).
emit saved cat saved.json
expect_out 'reports no PCIe link' pcibench dma "$e" --engine edu --dma-bits 32 --dir c2h --size 1K --total 2K --allow-dma
