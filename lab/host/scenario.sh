# Helpers for the host side of scenarios (NAME.host), sourced before it in a bash of its own
# (set -euo pipefail). Environment: SHM (ivshmem backing file), OUT (the scenario's guest output, for
# host_check), LAB_MACHINE.

# emitted LABEL: the stdout of the guest's `emit LABEL CMD...` (fails if the guest emitted no LABEL).
emitted() {
	awk -v l="$1" '$0 == "@@ENDOUT " l { on = 0 } on { print } $0 == "@@OUT " l { on = found = 1 }
		END { exit !found }' "$OUT"
}
