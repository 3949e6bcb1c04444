# served_dma's runs on q35-vu-noiommu, whose guest RAM the servers reach by DMA_READ/DMA_WRITE messages, which QEMU
# answers only while no vCPU waits on the device (lab/findings.md 15). The models are driven by time (issue 52); with
# memory by message `serve` moves their data on the session's clock thread after each access's reply, never inside
# the guest's access, so neither side waits on the other. Each DMA_READ asks QEMU for at most 64 KiB: QEMU 11.1 cuts
# a reply larger than its socket's send buffer short (lab/findings.md 15). The QDMA stream card's passes are staged
# there (fetch, move under its locks, then send), so no lock an access takes is held across a DMA message.
# machines: q35-vu-noiommu
# timeout: 600
. /lab/lib.sh
. /lab/served.sh
hugepages 16
cards="sim sim-nvram sim-xdma-st sim-qdma sim-qdma-st"
for c in $cards; do bind_vfio "$(served "$c")"; done
trap 'for c in $cards; do unbind "$(served "$c")"; done' EXIT
d="--allow-dma --size 4K --total 64K"
a=$(served sim)
for k in msix msi intx; do rows_ok 4 pcibench dma "$a" $d --completion both --irq-kind $k; done
rows_ok 4 pcibench latency "$a" --bar 4 --allow-dma --size 4K --dma-samples 8 --samples 100 --completion both
a=$(served sim-nvram)
rows_ok 4 pcibench dma "$a" $d --completion both --irq-kind intx
a=$(served sim-xdma-st)
rows_ok 4 pcibench dma "$a" $d --completion both --irq-kind msix
a=$(served sim-qdma)
for m in direct aggregated; do rows_ok 4 pcibench dma "$a" $d --completion both --qdma-intr $m; done
rows_ok 4 pcibench latency "$a" --bar 0 --allow-dma --size 4K --dma-samples 8 --samples 100 --completion both --qdma-intr direct
a=$(served sim-qdma-st)
for m in direct aggregated; do rows_ok 4 pcibench dma "$a" $d --design qdma-example --completion both --qdma-intr $m; done
