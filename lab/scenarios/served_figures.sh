# Figures, not checks (beyond each run verifying its data): per engine, the guest's DMA throughput and latency and
# its register read latency through QEMU's vfio-user-pci, emitted as CSV; the host side (served_figures.host)
# measures the same on the host, in process (the sim card) and through pcibench's own vfio-user client against
# `pcibench serve`, and prints the three side by side under the PASS line.
# machines: q35-vu
# timeout: 400
. /lab/lib.sh
. /lab/served.sh
hugepages 16
for c in sim sim-qdma sim-nvram sim-xdma-st; do
	a=$(served "$c")
	bind_vfio "$a"
	bar=0
	case $c in sim | sim-xdma-st) bar=4 ;; esac
	emit "dma $c" pcibench dma "$a" --allow-dma --size 4K,64K --total 256K --format csv
	emit "lat $c" pcibench latency "$a" --allow-dma --bar $bar --samples 2000 --dma --size 4K --dma-samples 20 --format csv
	unbind "$a"
done
