# Sourced by lab/run: machines q35-vu and q35-vu-noiommu, whose guests hold pcibench's served simulated cards as
# real PCI functions (issue 48). On the host, `pcibench serve` runs for each card in SERVED_CARDS, a process per
# card with its own socket and log in the boot's folder; QEMU 11's vfio-user client (`vfio-user-pci`,
# host/qemu11.sh) puts each behind a PCIe root port of its own; the guest's kernel drives them with its own
# vfio-pci, so every engine runs through a real kernel's VFIO with real interrupts.
#   q35-vu           intel-iommu (VFIO type1: QEMU maps the guest's IOVAs through the vIOMMU with DMA_MAP); the guest's
#                    RAM is a shared memfd, passed with each DMA_MAP, so the server's DMA lands in it directly.
#   q35-vu-noiommu   no IOMMU (vfio in no-IOMMU mode); the guest's RAM is not shared, so QEMU's DMA_MAPs carry no fd
#                    and every DMA of the server is a DMA_READ / DMA_WRITE message to QEMU.
# The guest finds a card with `served CARD` (lab/guest/served.sh: the card on root port SERVED_SLOT + its index).
#   served_start DIR MACHINE / served_stop DIR    the servers of one boot (DIR/CARD.sock, .log, .pid)
#   served_machine MACHINE DIR            sets QEMU_BIN, mach and vfio (qemu_args' locals) for such a machine
#   served_kernel MACHINE                 the guest kernel it boots and that kernel's initramfs
#   served_initrds BOOT...                the initramfs of each such kernel plus lspci (with its libraries and
#                                         pci.ids) and lab/guest/served.sh, once per run
#   served_logs DIR CONSOLE               what QEMU and the servers logged that is not right (none: prints nothing)

SERVED_CARDS=(sim sim-qdma sim-nvram sim-xdma-st sim-qdma-st)
# Users' models (issue 53, docs/models.md), served with `pcibench serve --model` on the root ports after the cards':
# NAME is examples/models/NAME, built once per run into $RUN/models/NAME.so (served_models).
SERVED_MODELS=(edu-rtl)
# the guest's lspci, copied from the host's with its libraries; Verilator, make and a C++ compiler for the models
SERVED_PACKAGES=(pciutils verilator make g++)
SERVED_SLOT=16 # root ports at 00:10.0 upwards, one a card, in SERVED_CARDS' order
machine_serves() { [[ $1 == q35-vu* ]]; } # q35-vu, q35-vu-noiommu, q35-vu612, q35-vu510

# served_args MACHINE CARD: how a card is served. q35-vu-noiommu offers no BAR as mmap-able (--no-mmap): QEMU then
# posts its BAR writes (No_reply), which it never does for a device with an mmap-able region
# (hw/vfio-user/device.c vfio_user_get_region_info), so the posted path is exercised there. q35-vu612 serves
# sim-qdma as a Versal CPM5, the register layout Linux's amd-qdma driver writes (host/kdrv.sh). With
# PCIBENCH_LAB_SERVE_TRACE set, each server also writes serve's --trace of the registers QEMU reached (DIR/CARD.trace).
served_args() {
	if [ "$1" = q35-vu-noiommu ]; then echo --no-mmap; fi
	# PCIBENCH_LAB_QDMA_IP: another variant there (soft3, eqdma4, eqdma5, cpm4), to see what the driver does with it.
	if [ "$1" = q35-vu612 ] && [ "$2" = sim-qdma ]; then echo --qdma-ip "${PCIBENCH_LAB_QDMA_IP:-cpm5}"; fi
	# q35-vu510: the NVRAM card with the least memory its size register can say (umem.c's whole window, written and
	# read back in the guest), as the conventional PCI card the MM-5425CN is (umem.c uses MWI without reading its
	# enable back).
	if [ "$1" = q35-vu510 ] && [ "$2" = sim-nvram ]; then echo --nvram-size 128M --conventional-pci; fi
	if [ -n "${PCIBENCH_LAB_SERVE_TRACE:-}" ]; then echo --trace "$3/$2.trace"; fi
}

# served_start DIR MACHINE: a `pcibench serve` per card, each logging to DIR/CARD.log; returns once every socket
# listens (bounded: a server that never binds fails the boot with its log).
served_start() {
	local dir=$1 c i bin args
	# PCIBENCH_LAB_SERVE: another pcibench to serve with (a debug build of serve, say); it runs on the host.
	bin=${PCIBENCH_LAB_SERVE:-$(pcibench_path x86_64)}
	mkdir -p "$dir"
	for c in "${SERVED_CARDS[@]}"; do
		rm -f "$dir/$c.sock"
		args=$(served_args "$2" "$c" "$dir")
		# shellcheck disable=SC2086 # no option, or one word
		"$bin" serve "$c" --socket "$dir/$c.sock" $args </dev/null >"$dir/$c.log" 2>&1 &
		echo $! >"$dir/$c.pid"
	done
	for c in "${SERVED_MODELS[@]}"; do
		rm -f "$dir/$c.sock"
		"$SERVED_MODEL_BIN" serve --model "$RUN/models/$c.so" --socket "$dir/$c.sock" </dev/null >"$dir/$c.log" 2>&1 &
		echo $! >"$dir/$c.pid"
	done
	for c in "${SERVED_CARDS[@]}" "${SERVED_MODELS[@]}"; do
		for ((i = 0; i < 300 * TIME_SCALE; i++)); do
			[ -S "$dir/$c.sock" ] && break
			kill -0 "$(cat "$dir/$c.pid")" 2>/dev/null || break
			sleep 0.1
		done
		[ -S "$dir/$c.sock" ] || {
			cat "$dir/$c.log" >&2
			return 1
		}
	done
}

# served_stop DIR: SIGTERM each server still running (one a host side killed is gone already) and reap it.
served_stop() {
	local dir=$1 c pid
	for c in "${SERVED_CARDS[@]}" "${SERVED_MODELS[@]}"; do
		[ -f "$dir/$c.pid" ] || continue
		pid=$(cat "$dir/$c.pid")
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		rm -f "$dir/$c.pid"
	done
}

# served_kernel MACHINE: "IMAGE INITRD", the guest kernel and its initramfs (modules, /init) before the served
# extras are appended: Debian 12's cloud kernel (prepare_kernel), and on q35-vu612 the 6.12 kernel of
# bookworm-backports (prepare_k612) that Linux's own XDMA and QDMA drivers need, and on q35-vu510 Debian 11's 5.10
# (prepare_k510), the last with umem.c.
served_kernel() {
	case $1 in
	q35-vu612) echo "$K612_VMLINUZ $RUN/initrd-k612.gz" ;; # host/kdrv.sh
	q35-vu510) echo "$K510_VMLINUZ $RUN/initrd-k510.gz" ;; # host/umem.sh
	*) echo "$VMLINUZ $RUN/initrd-x86_64.gz" ;;
	esac
}

# served_initrds BOOT...: for every distinct kernel the served machines among BOOT ("MACHINE scenarios...") boot,
# its initramfs with the served extras appended: $RUN/served-initrd/<its initramfs's name>.
served_initrds() {
	local b m base
	mkdir -p "$RUN/served-initrd"
	served_models
	for b in "$@"; do
		m=${b%% *}
		machine_serves "$m" || continue
		base=$(served_kernel "$m" | cut -d' ' -f2)
		[ -f "$RUN/served-initrd/$(basename "$base")" ] || served_initrd "$base" "$RUN/served-initrd/$(basename "$base")"
	done
}

served_machine() {
	local machine=$1 dir=$2 c i=0 ram=512M base
	QEMU_BIN=$QEMU11
	read -r kernel base <<<"$(served_kernel "$machine")"
	initrd=$RUN/served-initrd/$(basename "$base")
	if [ "$machine" = q35-vu612 ] || [ "$machine" = q35-vu510 ]; then
		# The vendors' drivers in the guest drive the cards themselves, through the kernel's DMA API: no IOMMU, no vfio
		# (lab_vfio=none), guest RAM a shared memfd, so the servers reach it directly through QEMU's DMA_MAPs.
		mach=(-object "memory-backend-memfd,id=mem,size=$ram,share=on" -machine q35,memory-backend=mem)
		vfio=none
	elif [ "$machine" = q35-vu ]; then
		# Guest RAM as a shared memfd: QEMU passes its fd with every DMA_MAP. The vIOMMU comes before the devices
		# it translates; caching-mode makes the guest's IOVA mappings visible to QEMU, which sends each as DMA_MAP.
		mach=(-object "memory-backend-memfd,id=mem,size=$ram,share=on" -machine q35,memory-backend=mem
			-device intel-iommu,intremap=on,caching-mode=on)
		vfio=type1
		# reboot=force: poweroff without machine_shutdown, so Linux does not turn DMAR off at the end. QEMU would then
		# map guest RAM into every container again, and a server a scenario killed (served_gone) makes that DMA_MAP
		# fail, which QEMU's vfio takes for a hardware error and aborts, after the guest's part is done.
		append+=" intel_iommu=on reboot=force"
	else
		# Guest RAM not shared: no fd to pass, so the servers reach it by DMA_READ / DMA_WRITE messages.
		mach=(-object "memory-backend-ram,id=mem,size=$ram" -machine q35,memory-backend=mem)
		vfio=noiommu
	fi
	# QEMU's vfio-user client traces (log backend, to a file of its own): the negotiation, DMA_MAP/UNMAP, SET_IRQS
	# and the server's requests (DMA_READ, DMA_WRITE), which served_summary counts.
	mach+=(-D "$dir/qemu-trace.log")
	for c in vfio_user_version vfio_user_dma_map vfio_user_dma_unmap vfio_user_set_irqs vfio_user_recv_request; do
		mach+=(-trace "$c")
	done
	for c in "${SERVED_CARDS[@]}" "${SERVED_MODELS[@]}"; do
		mach+=(-device "pcie-root-port,id=vu$i,bus=pcie.0,chassis=$((40 + i)),addr=$(printf 0x%x $((SERVED_SLOT + i)))"
			-device "{\"driver\":\"vfio-user-pci\",\"bus\":\"vu$i\",\"socket\":{\"path\":\"$dir/$c.sock\",\"type\":\"unix\"}}")
		i=$((i + 1))
	done
}

# served_initrd IN OUT: the x86-64 initramfs with a second cpio archive appended (the kernel unpacks each in turn):
# /lab/tools (Debian's lspci, the libraries it loads, the pci.ids pcibench is built with) and /lab/served.sh.
served_initrd() {
	local in=$1 out=$2 root=$RUN/initramfs-served lib v ids
	rm -rf "$root"
	mkdir -p "$root/lab/tools/lib"
	cp /usr/bin/lspci "$root/lab/tools/"
	for lib in $(ldd /usr/bin/lspci | awk '/=>/ { print $3 } /ld-linux/ { print $1 }'); do cp -L "$lib" "$root/lab/tools/lib/"; done
	# The crate's pci.ids at Cargo.lock's version, as host/inuse.sh does, so both name from the same list.
	v=$(awk '/^name = "pci-ids"$/ { getline; gsub(/[^0-9.]/, ""); print }' "$REPO/Cargo.lock")
	ids=$(compgen -G "${CARGO_HOME:-$HOME/.cargo}/registry/src/*/pci-ids-$v/pciids/pci.ids" | head -n 1 || true)
	cp "${ids:-/usr/share/misc/pci.ids}" "$root/lab/tools/pci.ids"
	cp "$LAB/guest/served.sh" "$root/lab/"
	{
		cat "$in"
		(cd "$root" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -1
	} >"$out"
}

# served_summary DIR: one line of what QEMU's client did over the boot, from its trace: the messages it sent that
# shape the device's memory and interrupts, and the server's requests it served.
served_summary() {
	local t=$1/qemu-trace.log
	[ -f "$t" ] || return 0
	awk '
		/^vfio_user_version / { v++ }
		/^vfio_user_dma_map / { m++; }
		/^vfio_user_dma_unmap / { u++ }
		/^vfio_user_set_irqs / { s++ }
		/^vfio_user_recv_request .*command 0xb$/ { r++ }
		/^vfio_user_recv_request .*command 0xc$/ { w++ }
		END { printf "QEMU vfio-user: %d VERSION, %d DMA_MAP, %d DMA_UNMAP, %d SET_IRQS; served %d DMA_READ, %d DMA_WRITE\n", v, m, u, s, r, w }
	' "$t"
}

# served_logs DIR CONSOLE: one line per thing QEMU or a server logged that shows a fault: QEMU's own lines on its
# stderr (the console file holds both), a server's error lines. Lines a scenario's host side expects (the server
# it killed: $SERVED_EXPECT, an extended regex) are left out.
served_logs() {
	local dir=$1 console=$2 c
	# QEMU's error_report lines, its hw_error ("qemu: hardware error: ..."), and the vfio-user client's own
	# error_printf lines (vfio_user_process: error reply on async request ...).
	grep -aE '^(qemu-system-x86_64|qemu): |^vfio_user_' "$console" | grep -Ev "${SERVED_EXPECT:-^$}" | sed 's/^/QEMU: /' || true
	for c in "${SERVED_CARDS[@]}" "${SERVED_MODELS[@]}"; do
		[ -f "$dir/$c.log" ] || continue
		# A client's summary counts the commands refused: any is a fault here (QEMU sends nothing it expects refused).
		grep -aiE 'error|panic|malformed|violation|[^0-9][1-9][0-9]* refused' "$dir/$c.log" | grep -Ev "${SERVED_EXPECT:-^$}" |
			sed "s/^/serve $c: /" || true
	done
}

# served_models: each of SERVED_MODELS built with its own Makefile, as a user builds it, into $RUN/models/NAME.so;
# and the pcibench that serves them: a dynamically linked one (the static build's C library cannot dlopen a C++
# model), the workspace's debug build (scripts/test-all's cargo test has built it by then).
SERVED_MODEL_BIN=$REPO/target/debug/pcibench
served_models() {
	local m t0
	t0=$(now)
	(cd "$REPO" && run_logged "$RUN/cargo-serve-models.log" cargo build -p pcibench-cli)
	log_step "pcibench to serve the models (dynamically linked): ready in $(secs "$t0" "$(now)")s"
	for m in "${SERVED_MODELS[@]}"; do
		t0=$(now)
		run_logged "$RUN/model-$m.log" make -s -C "$REPO/examples/models/$m" O="$RUN/models/$m"
		cp "$RUN/models/$m/"*.so "$RUN/models/$m.so"
		log_step "model $m: built in $(secs "$t0" "$(now)")s"
	done
}
