# served_dma's XDMA and NVRAM runs on q35-vu-noiommu, whose guest RAM the servers reach by DMA_READ / DMA_WRITE
# messages. Open (lab/findings.md 15): the sim models are driven by time, computed when the host looks (issue 52),
# so a served card moves data inside the guest's register read, on serve's session thread; QEMU answers a server's
# DMA messages only while no vCPU waits on the device, so the read and the DMA wait on each other until QEMU gives up
# after 5 s. Served cards need their data moved off the thread that answers register accesses, with accesses that
# do not advance the model, before this passes again.
# machines: q35-vu-noiommu
# open: a served card moves data inside a register read, which with guest memory by message deadlocks QEMU (lab/findings.md 15)
# timeout: 600
. /lab/lib.sh
. /lab/served.sh
hugepages 16
for c in sim sim-nvram; do bind_vfio "$(served "$c")"; done
trap 'for c in sim sim-nvram; do unbind "$(served "$c")"; done' EXIT
d="--allow-dma --size 4K --total 64K"
a=$(served sim)
for k in msix msi intx; do rows_ok 4 pcibench dma "$a" $d --completion both --irq-kind $k; done
a=$(served sim-nvram)
rows_ok 4 pcibench dma "$a" $d --completion both --irq-kind intx
