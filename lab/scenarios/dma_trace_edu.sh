# --trace on QEMU's edu through VFIO (type1 with IOVAs on q35-iommu, no-IOMMU with physical addresses on pc): the
# guest runs `dma` both ways, `latency --dma --irq` (completion by MSI), `info`, and a `dma` it interrupts with
# SIGINT, each with --trace, and emits the files; the host side checks each against hw/misc/edu.c: the DMA
# registers 0x80/0x88/0x90 written, then the command 0x98 with the start bit (and the direction bit for
# card-to-host, the IRQ bit with --irq), the command polled until the start bit clears, the card given the
# addresses of the buffers the trace lists, and every trace complete (the last line says how the run ended).
# machines: pc q35-iommu
# timeout: 180
. /lab/lib.sh
a=$(find_dev 1234:11e8)
trap 'unbind "$a"' EXIT
bind_vfio "$a"
echo 8 >/proc/sys/vm/nr_hugepages
t=/tmp/trace
mkdir -p $t

expect_out "trace: [0-9]+ lines in $t/dma.jsonl" \
	pcibench dma "$a" --engine edu --dma-bits 32 --size 4095 --total 8K --allow-dma --trace $t/dma.jsonl
emit dma cat $t/dma.jsonl
expect_out "trace: [0-9]+ lines in $t/latency.jsonl" \
	pcibench latency "$a" --width 32 --samples 100 --dma --irq --size 64 --dma-samples 2 --dma-bits 32 --allow-dma \
	--trace $t/latency.jsonl
emit latency cat $t/latency.jsonl
expect_out "trace: [0-9]+ lines in $t/info.jsonl" pcibench info "$a" --trace $t/info.jsonl
emit info cat $t/info.jsonl

# Ctrl-C in the middle of a long run (edu takes ~100 ms a transfer): once a command is in the file.
pcibench dma "$a" --engine edu --dma-bits 32 --size 4095 --total 4M --allow-dma --trace $t/int.jsonl >/dev/null 2>&1 &
pid=$!
i=0
until grep -q '"off":"0x98","w":32,"v":"0x1"' $t/int.jsonl 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 600 ] || fail "no DMA command traced in 60 s"
	sleep 0.1
done
kill -INT $pid
rc=0
wait $pid || rc=$?
[ $rc = 130 ] || fail "interrupted dma exited $rc, want 130"
ok "dma --trace interrupted by SIGINT exits 130"
emit interrupted cat $t/int.jsonl

# Refused before anything runs: a symbolic link, a directory.
ln -s /tmp/elsewhere $t/link.jsonl
expect_rc 2 'is a symbolic link' pcibench dma "$a" --engine edu --dma-bits 32 --allow-dma --trace $t/link.jsonl
[ ! -e /tmp/elsewhere ] || fail "the link's target was created"
expect_rc 2 'is a directory' pcibench info "$a" --trace $t
