# Every stream of two served cards at once for a minute through the guest's vfio-pci (issue 56: concurrency on
# the served cards): the XDMA card's channel both ways and a QDMA queue each way, one polling loop,
# a row per stream every 10 s, each stream's data checked with guards at every report, then the summary: a row per
# stream, each card's aggregate and fairness per direction, and no errors.
# machines: q35-vu
# timeout: 300
. /lab/lib.sh
. /lab/served.sh
hugepages 32
x=$(served sim)
q=$(served sim-qdma)
bind_vfio "$x"
bind_vfio "$q"
trap 'unbind "$x"; unbind "$q"' EXIT
out=$(pcibench dma "$x" "$q" --allow-dma --size 64K --duration 60s --every 10s 2>&1) ||
	fail "the soak failed: $out"
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^errors: none' || fail "want 'errors: none'"
# Four streams (XDMA ch0 both ways, QDMA q0 H2C and q1 C2H), each with a row per interval and a summary row.
for s in "$x ch0 h2c" "$x ch0 c2h" "$q q0 h2c" "$q q1 c2h"; do
	rows=$(printf '%s\n' "$out" | grep -cF "$s") || true
	[ "${rows:-0}" -ge 6 ] || fail "stream '$s': want a row per 10 s interval and a summary row, got $rows"
	! printf '%s\n' "$out" | grep -F "$s" | grep -q MISMATCH || fail "stream '$s' has a row that did not verify"
done
for d in "$x h2c" "$x c2h" "$q h2c" "$q c2h"; do
	printf '%s\n' "$out" | grep -q "^aggregate $d: " || fail "want the aggregate of $d"
done
ok "dma --duration 60s on two served cards: 4 streams, every interval verified, no errors"
