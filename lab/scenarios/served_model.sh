# A user's own RTL in a guest (issue 53): the edu-compatible Verilog design of examples/models/edu-rtl, simulated by
# Verilator behind `pcibench serve --model` on the host, is a PCI function on the guest's bus through QEMU's
# vfio-user-pci, and pcibench in the guest drives it through the guest kernel's vfio-pci as it drives QEMU's own edu:
# its config space as lspci reads it, peek and poke of its registers and RAM, PIO on BAR2, DMA both ways by polling
# and by MSI and INTx, DMA latency; every row verified.
# Only on q35-vu, whose guest RAM is a shared memfd the server maps: on q35-vu-noiommu the model's DMA goes by
# DMA_READ/DMA_WRITE messages, which QEMU 11.1 serves on its main loop, never while a vCPU waits for the reply to a
# register read of the same device; and a model, one thread, answers that read only once its DMA is done (the sim
# cards' registers answer while their engines wait). docs/models.md, Limits.
# machines: q35-vu
# timeout: 600
. /lab/lib.sh
. /lab/served.sh
hugepages 16
a=$(served edu-rtl)
lspci -nn -s "$a" | grep -q '\[1234:11e8\] (rev 10)' || fail "lspci does not show the design's ids: $(lspci -nn -s "$a")"
bind_vfio "$a"
trap 'unbind "$a"' EXIT
pcibench info "$a" | grep -E 'BAR2: .* size 16 KiB' || fail "no 16 KiB BAR2: $(pcibench info "$a")"
# peek_is BAR OFFSET VALUE [ARGS...]: a register reads VALUE (the line shown either way).
peek_is() {
	out=$(pcibench peek "$a" "$1" "$2" ${4:+"$4"} ${5:+"$5"} 2>&1) || fail "peek $1 $2: $out"
	echo "$out"
	printf '%s\n' "$out" | grep -q "= $3\$" || fail "BAR$1+$2 reads ${out##*= }, not $3"
}
peek_is 0 0x0 0x010000ed
pcibench poke "$a" 0 0x4 0x12345678 --allow-write
# The guest's vfio-pci resets the function whenever it is opened (a secondary bus reset of its root port, which
# QEMU passes to the server as DEVICE_RESET, and serve to the model's reset): the next command finds the liveness
# register at its reset value. The RAM behind BAR2 keeps its contents across a reset, as SRAM does.
peek_is 0 0x4 0x00000000
pcibench poke "$a" 2 0x100 0x1122334455667788 --width 64 --allow-write
peek_is 2 0x104 0x11223344
peek_is 2 0x100 0x1122334455667788 --width 64
# PIO on BAR2 (BAR0 is the edu engine's registers): every row verified.
out=$(pcibench pio "$a" --size 256 --total 2K --width 32 --map uc --allow-write 2>&1) || fail "pio: $out"
printf '%s\n' "$out"
rows=$(printf '%s\n' "$out" | grep -E '^ +2 ' || true)
[ -n "$rows" ] || fail "pio measured no BAR2 row"
printf '%s\n' "$rows" | grep -Ev ' ok( |$)' && fail "pio rows not verified"
ok "pio rows on BAR2 verified"
rows_ok 4 pcibench dma "$a" --allow-dma --size 100,4095 --total 16K
for k in msi intx; do
	rows_ok 4 pcibench dma "$a" --allow-dma --size 1K --total 4K --completion both --irq-kind $k
done
rows_ok 2 pcibench latency "$a" --allow-dma --dma --size 512 --dma-samples 8 --samples 100
