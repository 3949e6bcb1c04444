# The library's copy-routine unit tests (mmio::), built for aarch64, run on the guest's kernel: width and feature
# detection agree with /proc/cpuinfo's Features line (under qemu-user they fall back to AT_HWCAP), every
# available width copies exactly, and the refusals name what to use instead.
# machines: virt-smmuv3
. /lab/lib.sh
# Time limits in unit tests are scaled, not skipped, on an emulated CPU (src/testing.rs).
export PCIBENCH_TEST_SLOWDOWN=10
grep -q '^Features.* asimd' /proc/cpuinfo || fail "this guest CPU reports no asimd: $(grep ^Features /proc/cpuinfo)"
ok "the kernel reports asimd: $(grep -m1 ^Features /proc/cpuinfo)"
expect_out '^test mmio::tests::available_agrees_with_the_kernels_hwcaps \.\.\. ok$' /lab/bin/pcibench-tests mmio:: --test-threads 1
n=$(printf '%s\n' "$out" | sed -n 's/^test result: ok\. \([0-9]*\) passed; 0 failed.*/\1/p')
[ "${n:-0}" -ge 10 ] || fail "expected at least 10 mmio tests to pass, got '${n:-none}'"
echo "note: $n mmio unit tests passed in the aarch64 guest"
