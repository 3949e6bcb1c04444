# DMA under offered load on a served card in the guest: `dma --rate` on sim-qdma through the guest's vfio-pci,
# open loop, every transfer verified, each row's achieved rate and latency percentiles reported.
# machines: q35-vu
# timeout: 180
. /lab/lib.sh
. /lab/served.sh
hugepages 16
a=$(served sim-qdma)
bind_vfio "$a"
trap 'unbind "$a"' EXIT
out=$(pcibench dma "$a" --allow-dma --size 4K --total 256K --rate 200,1K 2>&1) || fail "dma --rate failed: $out"
printf '%s\n' "$out"
rows=$(printf '%s\n' "$out" | grep -E '^(h2c|c2h) +4 KiB ')
[ "$(printf '%s\n' "$rows" | grep -c .)" = 4 ] || fail "want 4 rows (2 rates, 2 directions)"
! printf '%s\n' "$rows" | grep -Ev ' ok( |$)' || fail "a row did not verify"
[ "$(printf '%s\n' "$rows" | grep -c ' 200\.00 /s ')" = 2 ] || fail "want a row offered 200/s each way"
[ "$(printf '%s\n' "$rows" | grep -c ' 1\.000 K/s ')" = 2 ] || fail "want a row offered 1 K/s each way"
ok "dma --rate on sim-qdma: 4 rows, every transfer verified"
