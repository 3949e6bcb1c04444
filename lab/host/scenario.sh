# Helpers for the host side of scenarios (NAME.host), sourced before it in a bash of its own
# (set -euo pipefail). A host side may define host_setup (before the boot), host_during (beside the running
# guest) and host_check (after it). Environment: SHM (ivshmem backing file), OUT (the scenario's guest output,
# for host_check), CONSOLE (the guest's console as it is written), MON (QEMU's monitor socket), LAB_MACHINE,
# LAB_TIME_SCALE (PCIBENCH_LAB_TIME_SCALE), PCIBENCH_LAB_BIN (the lab's static x86-64 pcibench, for measurements on
# the host), and on the served machines SERVED (the servers' folder: CARD.sock, CARD.log, CARD.pid; host/served.sh).
#
# Hand-offs wait on events, never on sleeps: where the host must act while the guest is inside a step, the guest
# holds the step (e.g. SIGSTOPs the pcibench run once its trace shows the step began), prints a cue, and resumes
# only when what the host did has landed (the kernel's counters moved). No order here depends on timing.

# emitted LABEL: the stdout of the guest's `emit LABEL CMD...` (fails if the guest emitted no LABEL).
emitted() {
	awk -v l="$1" '$0 == "@@ENDOUT " l { on = 0 } on { print } $0 == "@@OUT " l { on = found = 1 }
		END { exit !found }' "$OUT"
}

# wait_console TEXT [SECONDS]: wait until the guest's console shows TEXT (default 120 s, scaled by
# PCIBENCH_LAB_TIME_SCALE as the lab's other limits: a loaded host boots slower, it does not hang).
wait_console() {
	local i limit=$((${2:-120} * 10 * ${LAB_TIME_SCALE:-1}))
	for ((i = 0; i < limit; i++)); do
		grep -qF -- "$1" "$CONSOLE" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "host: the guest never printed '$1'" >&2
	return 1
}

# monitor COMMAND: run one HMP command on QEMU's monitor and print its reply.
monitor() {
	python3 - "$MON" "$1" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(5)
buf = b""
while not buf.endswith(b"(qemu) "):  # the banner and first prompt
    buf += s.recv(4096)
s.sendall(sys.argv[2].encode() + b"\n")
buf = b""
while not buf.endswith(b"(qemu) "):
    buf += s.recv(4096)
# The monitor echoes the command with terminal escapes: keep the reply lines only.
lines = buf.decode(errors="replace").replace("\r", "").split("\n")[1:-1]
print("\n".join(lines))
PY
}
