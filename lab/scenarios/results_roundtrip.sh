# Results you can keep (issue 14) on a real kernel: PIO on ivshmem BAR2 over sysfs with --size 8..1M --save,
# twice, then plot and compare in the guest; a third run through VFIO, which compare calls out first (the access
# path and IOMMU mode differ). The host parses the saved runs, the SVG and the comparison (python3) and checks
# them against what this guest's kernel shows. A truncated file, another command's output, a run of another
# command and a future format version each get one clear line and exit 2.
# machines: q35-iommu virt
# timeout: 240
. /lab/lib.sh
a=$(find_dev 1af4:1110)
trap 'unbind "$a"' EXIT
mem_enable "$a"
echo "@@ADDR $a"
echo "@@GROUP $(group_of "$a")"

pio() { pcibench pio "$a" --bar 2 --map uc --width 64 --size 8..1M --total 1M --allow-write "$@"; }
for n in a b; do
	expect_out '^  2 uc +h2c 64 +1 MiB .* ok' pio --save "$n.json"
done
emit a.json cat a.json

expect_out '' pcibench plot a.json b.json --label first -o ab.svg
emit ab.svg cat ab.svg
# Two runs of the same thing on an emulated device: whatever the noise says, the rows match and it exits 0 or 5.
expect_rc "0 5" '^summary: [0-9]+ slower, [0-9]+ faster' pcibench compare a.json b.json
rc=0
pcibench compare a.json b.json --json >compare.json || rc=$?
case $rc in 0 | 5) ;; *) fail "compare --json: exit $rc" ;; esac
emit compare.json cat compare.json
expect_rc "0 5" '^configuration,kind,dir,size_bytes,a_median_mbps' pcibench compare a.json b.json --format csv

# Bad input: one line each, exit 2, nothing written.
one_line() {
	pat=$1
	shift
	rc=0
	out=$("$@" 2>&1) || rc=$?
	printf '%s\n' "$out"
	[ "$rc" = 2 ] || fail "exit $rc, want 2: $*"
	[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "not one line: $*"
	printf '%s\n' "$out" | grep -Eq -- "$pat" || fail "no /$pat/: $*"
	ok "one line, exit 2, /$pat/: $*"
}
head -c 3000 a.json >cut.json
one_line '^pcibench: cut.json is truncated: the JSON ends at line [0-9]+' pcibench plot cut.json -o cut.svg
[ ! -e cut.svg ] || fail "a plot was written from a truncated file"
pcibench info "$a" --json >info.json
one_line 'info.json is `pcibench info --json` output \(no measurement\), not a saved run' pcibench compare info.json a.json
pcibench pio "$a" --bar 2 --map uc --size 4K --total 64K --allow-write --json >pio.json
one_line 'pio.json is `pcibench pio --json` output, not a saved run' pcibench plot pio.json -o x.svg
sed 's/"version": 1,/"version": 9,/' a.json >future.json
one_line 'future.json is a version 9 saved run, newer than this pcibench' pcibench plot future.json -o x.svg
pcibench dma sim --size 4K --total 64K --save sim-dma.json >/dev/null
one_line 'a.json holds a pio run and sim-dma.json a dma run: compare needs two runs of the same command' \
	pcibench compare a.json sim-dma.json
one_line 'there is no directory no/such' pcibench pio "$a" --bar 2 --save no/such/a.json

# Through VFIO: the saved run says so, and compare leads with it (loudly: a different way in).
via=vfio
[ "$LAB_VFIO" = noiommu ] && via=vfio-noiommu
bind_vfio "$a"
expect_out '^  2 uc +h2c 64 +1 MiB .* ok' pio --via "$via" --save v.json
emit v.json cat v.json
expect_rc "0 5" "^!! access path +sysfs -> $via" pcibench compare a.json v.json
# The IOMMU mode changes only where vfio made a no-IOMMU group for the device (virt); with an IOMMU (q35-iommu)
# the device keeps its group and its group's type.
if [ "$LAB_VFIO" = noiommu ]; then
	expect_rc "0 5" '^QUESTIONABLE: the runs differ in access path, IOMMU:' pcibench compare a.json v.json
else
	expect_rc "0 5" '^QUESTIONABLE: the runs differ in access path:' pcibench compare a.json v.json
fi
