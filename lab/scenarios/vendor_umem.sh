# The Micro Memory card's own Linux block driver (drivers/block/umem.c, built from Debian 11's linux-source-5.10: it
# left mainline after 5.9) drives the served `sim-nvram` (seed 001's MM-5425CN, served with 128 MiB of card memory)
# in a 5.10 guest: it binds by its own id table, reads the card's size and batteries, and the whole window is
# written through its block device, read back once the caches are dropped, and compared; the chains complete by the
# card's INTx; no error from the driver; the boot fails on any model violation serve logs (host/served.sh).
# machines: q35-vu510
# timeout: 300
. /lab/lib.sh
. /lab/served.sh
a=$(served sim-nvram)
insmod /lib/umem/umem.ko || fail "insmod umem.ko failed: $(dmesg | tail -n 5)"
[ "$(driver_of "$a")" = umem ] || fail "umem did not bind $a: $(dmesg | tail -n 8)"
wait_until 10 "/dev/umema" test -b /dev/umema
size=$(($(cat /sys/block/umema/size) * 512))
[ "$size" = $((128 << 20)) ] || fail "umema holds $size bytes, not the card's 128 MiB"
ok "umem bound $a: /dev/umema, $size bytes ($(dmesg | grep -a 'umem.*Size' | tail -n 1 | sed 's/.*: //'))"
intx() { awk '$NF == "umem" { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts; }
i0=$(intx)
dd if=/dev/urandom of=/tmp/window bs=1M count=128 2>/dev/null
want=$(sha256sum </tmp/window | cut -d' ' -f1)
dd if=/tmp/window of=/dev/umema bs=1M conv=fsync 2>/dev/null || fail "writing the whole window failed: $(dmesg | tail -n 5)"
i1=$(intx)
sync
echo 3 >/proc/sys/vm/drop_caches
got=$(sha256sum </dev/umema | cut -d' ' -f1)
i2=$(intx)
[ "$got" = "$want" ] || fail "the window read back differs from what was written ($got, not $want)"
ok "the whole window (128 MiB) written and read back through /dev/umema: SHA-256 $want"
[ "$i1" -gt "$i0" ] && [ "$i2" -gt "$i1" ] || fail "INTx: $i0, $i1 after the write, $i2 after the read (umem's line)"
ok "INTx: $((i1 - i0)) interrupts during the write, $((i2 - i1)) during the read"
# umem.c sets the card's MEMORY_INITIALIZED user bit once writes in order reach its end (add_bio's init_size).
if dmesg | grep -aq 'memory now initialised'; then echo "note: umem: memory now initialised (the card's user bit set)"; fi
rmmod umem || fail "rmmod umem failed"
bad=$(dmesg -r | grep -aE '^<[0-4]>' | grep -av 'loading out-of-tree module taints kernel' | grep -ai 'umem' || true)
bad="$bad$(dmesg | grep -aE 'WARNING:|BUG:|Oops|Call Trace' || true)"
[ -z "$bad" ] || fail "the kernel logged errors: $bad"
ok "dmesg: no error or warning from umem"
