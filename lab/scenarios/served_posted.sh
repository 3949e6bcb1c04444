# Posted writes: on q35-vu-noiommu the cards are served with --no-mmap, so QEMU sends the guest's BAR writes with
# No_reply (it posts none for a device with an mmap-able region). The guest writes the served sim card's BAR2 (card
# memory) through its vfio-pci with `pio`; the host side (served_posted.host) then finds the writes counted as posted
# in serve's log, and QEMU's log (the lab's served-logs check) holds no complaint of a reply it did not expect.
# machines: q35-vu-noiommu
# timeout: 180
. /lab/lib.sh
. /lab/served.sh
a=$(served sim)
bind_vfio "$a"
trap 'unbind "$a"' EXIT
# 64 KiB in 64-bit stores: 8192 writes, each a REGION_WRITE message QEMU posts; then read back (pio verifies).
emit pio pcibench pio "$a" --via vfio-noiommu --bar 2 --map uc --width 64 --dir h2c --size 64K --total 64K --allow-write --json
ok "pio wrote BAR2 through the guest's vfio-pci"
