# pcibench list finds edu (1234:11e8) and ivshmem-plain (1af4:1110), as root and as the unprivileged user;
# -d and -s select; --json is one document that agrees with the text (host_check parses it).
# machines: pc q35-iommu virt-smmuv3
. /lab/lib.sh
e=$(find_dev 1234:11e8)
i=$(find_dev 1af4:1110)
echo "edu at $e, ivshmem-plain at $i"
expect_out "^$e .*\[1234:11e8\].* driver=none" pcibench list
expect_out "^$i .*\[1af4:1110\]" pcibench list
expect_out "^$e .*\[1234:11e8\]" as_user pcibench list

out=$(pcibench list -d 1234:11e8)
echo "$out"
[ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "^$e " || fail "list -d 1234:11e8 is not edu alone"
ok "list -d 1234:11e8 shows edu alone"
out=$(pcibench list -s "$i")
echo "$out"
[ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "^$i " || fail "list -s $i is not ivshmem alone"
ok "list -s $i shows ivshmem alone"

echo "@@ADDR edu=$e ivshmem=$i"
emit text pcibench list
emit json pcibench list --json
