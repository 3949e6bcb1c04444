# The ivshmem-plain BAR2 is the host's /dev/shm backing file: the guest reads what host_setup put there and
# writes words host_check must find; the unprivileged user exists and cannot reach /dev/mem.
# machines: pc q35-iommu virt
. /lab/lib.sh
a=$(find_dev 1af4:1110)
mem_enable "$a"
bar2=$(bar_start "$a" 2)
echo "ivshmem-plain at $a, BAR2 at $bar2"
expect_out '^0x600DF00D$' devmem "$bar2" 32
devmem $((bar2 + 0x100)) 32 0xCAFEBABE
devmem $((bar2 + 0x104)) 32 0x11223344
expect_out '^0xCAFEBABE$' devmem $((bar2 + 0x100)) 32
expect_out '^1000$' as_user id -u
expect_fail as_user devmem "$bar2" 32
