# served_irq's check on the NVRAM card's INTx (lab/guest/served.sh irq_held): the signals the guest's vfio-pci sent
# on its INTx eventfd must be what pcibench counted plus what it left unread. This card's line is often still up
# when pcibench unmasks, and vfio-pci's unmask path then signals again without an interrupt (vfio_pci_intrs.c
# vfio_pci_intx_unmask_handler returns 1), which /proc/interrupts never counts (lab/findings.md 14): the kernel's
# count is taken by kretprobes on its INTx handler (IRQ_HANDLED) and on its unmask handler (a re-send).
# machines: q35-vu
# timeout: 300
. /lab/lib.sh
. /lab/served.sh
hugepages 16
a=$(served sim-nvram)
bind_vfio "$a"
trap 'kill -KILL ${pid:-} 2>/dev/null || true; unbind "$a"' EXIT
irq_held sim-nvram intx
