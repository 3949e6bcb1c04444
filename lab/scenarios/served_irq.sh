# Real interrupts through the guest kernel: on each served card and each interrupt kind it offers, a run completing
# by interrupt is held mid-run (SIGSTOP) and the kernel's count on the card's vfio lines in /proc/interrupts is
# what pcibench counted (its trace's irq lines) plus what its eventfds hold unread; SIGINT then ends it and no
# line is left (lab/guest/served.sh irq_held).
# machines: q35-vu
# timeout: 600
. /lab/lib.sh
. /lab/served.sh
hugepages 16
for c in $SERVED_CARDS; do bind_vfio "$(served "$c")"; done
# A run left behind by a failed check (irq_held's $pid) is ended first: it would hold its card.
trap 'kill -KILL ${pid:-} 2>/dev/null || true; for c in $SERVED_CARDS; do unbind "$(served "$c")"; done' EXIT
for k in msix msi intx; do irq_held sim $k; done
irq_held sim-qdma msix --qdma-intr direct
irq_held sim-qdma msix --qdma-intr aggregated
irq_held sim-xdma-st msix
irq_held sim-qdma-st msix --qdma-intr aggregated --design qdma-example
