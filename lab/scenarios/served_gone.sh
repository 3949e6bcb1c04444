# A served card whose server dies mid-run: while `dma` runs on the served sim card through the guest's vfio-pci, the
# host kills its `pcibench serve` (SIGTERM: served_gone.host), so the function answers all-ones from then on, as a
# card pulled from its slot would. The guest's run ends with exit 1 and the one card-gone line, nothing hangs (the
# run, a later `info`, the poweroff), and the other cards still work. serve ends its connections so that QEMU reads
# EOF, not ECONNRESET, on which QEMU 11.1 aborts (error_setv assertion); a SIGKILLed server cannot, so with SIGKILL
# QEMU 11.1 aborts in most runs (lab/findings.md 13). q35-vu boots with reboot=force (lab/host/served.sh).
# machines: q35-vu
# timeout: 240
. /lab/lib.sh
. /lab/served.sh
hugepages 16
a=$(served sim)
bind_vfio "$a"
t=/tmp/gone.jsonl
pcibench dma "$a" --allow-dma --size 4K --total 1G --dir h2c --trace $t >/tmp/gone.out 2>/tmp/gone.err &
pid=$!
# Event: the run has begun moving data (descriptors in its trace).
running() { grep -qF '"ev":"desc"' $t 2>/dev/null || ! kill -0 $pid 2>/dev/null; }
wait_until 120 "the dma run's first descriptor" running
kill -0 $pid 2>/dev/null || fail "the dma run ended before its server was killed: $(cat /tmp/gone.err)"
echo "@@SERVED-KILL sim"
ended() { ! kill -0 $pid 2>/dev/null; }
wait_until 120 "the dma run to end once its server was killed" ended
rc=0
wait $pid || rc=$?
cat /tmp/gone.err
[ "$rc" = 1 ] || fail "the run exited $rc, want 1"
grep -Eq "^pcibench: $a no longer answers \(surprise removal, link down, or a reset\)" /tmp/gone.err ||
	fail "no card-gone line on stderr"
ok "the run ended with exit 1 and the card-gone line"
tail -n 1 $t | grep -q '"ev":"end"' || fail "the trace is not whole"
ok "its trace ends: $(tail -n 1 $t)"
expect_rc "0 1 2" . pcibench info "$a"
ok "info on the dead card returned"
unbind "$a"
# The other cards are their own servers: still there.
for c in sim-qdma sim-nvram; do
	b=$(served "$c")
	bind_vfio "$b"
	rows_ok 2 pcibench dma "$b" --allow-dma --size 4K --total 16K
	unbind "$b"
done
