# Every engine of the served cards through the guest kernel's vfio-pci (type1 behind the vIOMMU on q35-vu, whose
# guest RAM the servers map from a shared memfd; served_dma_noiommu is the same with guest RAM reached by message):
# `dma` both directions, verified, by polling and by interrupt side by side
# (--completion both) with every interrupt kind the card offers (XDMA: MSI-X, MSI, INTx; umem: INTx; QDMA: MSI-X,
# direct and aggregated), and `latency --dma` the same way; the stream cards' engines too.
# machines: q35-vu
# timeout: 600
. /lab/lib.sh
. /lab/served.sh
hugepages 16
for c in $SERVED_CARDS; do bind_vfio "$(served "$c")"; done
trap 'for c in $SERVED_CARDS; do unbind "$(served "$c")"; done' EXIT
d="--allow-dma --size 4K --total 64K"
l="--allow-dma --size 4K --dma-samples 8 --samples 100"

a=$(served sim)
for k in msix msi intx; do
	rows_ok 4 pcibench dma "$a" $d --completion both --irq-kind $k
	rows_ok 4 pcibench latency "$a" --bar 4 $l --completion both --irq-kind $k
done
a=$(served sim-nvram)
rows_ok 4 pcibench dma "$a" $d --completion both --irq-kind intx
rows_ok 4 pcibench latency "$a" --bar 0 $l --completion both --irq-kind intx
a=$(served sim-xdma-st)
for k in msix msi intx; do rows_ok 4 pcibench dma "$a" $d --completion both --irq-kind $k; done
a=$(served sim-qdma)
for m in direct aggregated; do
	rows_ok 4 pcibench dma "$a" $d --completion both --qdma-intr $m
	rows_ok 4 pcibench latency "$a" --bar 0 $l --completion both --qdma-intr $m
done
# QDMA stream queues drive the vendor's example design, which no register identifies: on a real function (as the
# guest sees the served card) pcibench runs them only when told the design is there (--design).
a=$(served sim-qdma-st)
for m in direct aggregated; do rows_ok 4 pcibench dma "$a" $d --design qdma-example --completion both --qdma-intr $m; done
