# Sourced by lab/run after prepare.sh: what the aarch64 machines (virt, virt-smmuv3) need, cached under
# $CACHE/aarch64.
#   prepare_arm64     Debian's arm64 cloud kernel (Image), its stock vfio (type1) and uio modules, vfio modules
#                     cross-built with no-IOMMU support and udmabuf cross-built (/dev/udmabuf), arm64 busybox-static
#                                                      -> $A64_VMLINUZ, $A64_KO_DIR/{type1,noiommu,extra}, $A64_BUSYBOX
#   build_arm64_unit_tests   the library's unit-test binary for aarch64, for the guest -> $RUN/pcibench-tests-aarch64
# The host is amd64 and its dpkg is left alone: arm64 packages are resolved and downloaded through apt with a
# package-list folder of its own ($CACHE/aarch64/apt) and arm64 as apt's only architecture, from the host's own
# sources (deb.debian.org on a stock Debian 12). Nothing is installed: the .debs are unpacked with dpkg-deb -x.

# Host tools for these machines: QEMU for Arm; the cross compiler, which is also the linker (with glibc's static
# libc.a for arm64) that .cargo/cross.toml names for aarch64-unknown-linux-gnu; what kbuild needs on the host.
ARM64_PACKAGES=(qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu
	make xz-utils libelf1)
A64_ROOT=$CACHE/aarch64
A64_APT=$A64_ROOT/apt

# arm64_apt TOOL ARGS...: apt-get / apt-cache with the private arm64 package lists.
arm64_apt() {
	local tool=$1
	shift
	"$tool" -o Dir::State::Lists="$A64_APT/lists" -o Dir::Cache="$A64_APT/cache" \
		-o APT::Architecture=arm64 -o APT::Architectures=arm64 \
		-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false \
		-o APT::Sandbox::User=root "$@"
}

arm64_update() {
	log_step "apt-get update (arm64 package lists, $A64_APT)"
	mkdir -p "$A64_APT/lists/partial" "$A64_APT/cache/archives/partial"
	run_logged "$RUN/apt-update-arm64.log" arm64_apt apt-get update
	A64_UPDATED=1
}

# The arm64 cloud kernel linux-image-cloud-arm64 depends on: A64_KREL (6.1.0-NN-cloud-arm64), A64_KVER.
arm64_kernel_dep() {
	arm64_apt apt-cache show --no-all-versions linux-image-cloud-arm64 2>/dev/null |
		sed -n 's/^Depends: .*linux-image-\([0-9][^ ]*-cloud-arm64\) (= \([^)]*\)).*/\1 \2/p' | head -n 1
}
A64_UPDATED=
resolve_arm64_kernel() {
	local dep=
	# Lists older than a week are refreshed (~3 s), so a new point release is picked up as on the x86 side.
	if [ -n "$(find "$A64_APT/lists" -maxdepth 1 -name '*_InRelease' -mtime -7 2>/dev/null)" ]; then
		dep=$(arm64_kernel_dep) || true
	fi
	if [ -z "$dep" ]; then
		arm64_update
		dep=$(arm64_kernel_dep) || true
	fi
	[ -n "$dep" ] || die "cannot resolve the arm64 kernel package linux-image-cloud-arm64 depends on"
	read -r A64_KREL A64_KVER <<<"$dep"
	A64_KABI=${A64_KREL%-cloud-arm64}
	A64_KSERIES=$(echo "$A64_KREL" | cut -d. -f1,2)
}

# arm64_download PKG...: into the current directory; after a failure (stale lists: 404) update once and retry.
arm64_download() {
	local log=$RUN/apt-download-arm64.log
	if ! arm64_apt apt-get download "$@" >"$log" 2>&1; then
		[ -n "$A64_UPDATED" ] || arm64_update
		run_logged "$log" arm64_apt apt-get download "$@"
	fi
}

prepare_arm64() {
	local lock
	exec {lock}>"$CACHE/.lock"
	flock "$lock"
	resolve_arm64_kernel
	local kdir=$A64_ROOT/kernel-${A64_KREL}_$A64_KVER
	A64_VMLINUZ=$kdir/Image A64_KO_DIR=$kdir/ko A64_BUSYBOX=$kdir/busybox
	# (A folder from before the no-IOMMU or udmabuf builds lacks their modules: it is rebuilt.)
	if [ -f "$kdir/.complete" ] && [ -f "$A64_KO_DIR/noiommu/vfio.ko" ] && [ -f "$A64_KO_DIR/extra/udmabuf.ko" ]; then
		log_step "arm64 kernel $A64_KREL ($A64_KVER): cached"
		exec {lock}>&-
		return 0
	fi
	log_step "arm64 kernel $A64_KREL ($A64_KVER): fetching, cross-building the no-IOMMU vfio and udmabuf modules"
	local t0 work=$kdir/work m f p want=()
	t0=$(now)
	rm -rf "$kdir"
	mkdir -p "$kdir/download" "$work/root"
	(cd "$kdir/download" && arm64_download "linux-image-$A64_KREL=$A64_KVER" "linux-headers-$A64_KREL=$A64_KVER" \
		"linux-headers-$A64_KABI-common=$A64_KVER" busybox-static)
	# For the module build, from the host's (amd64) archive: linux-source (architecture-independent) and
	# linux-kbuild, whose fixdep/modpost must run on this host. The x86 kernel's folder has both when it is the
	# same version (hard links, no second 140 MB download); otherwise they are downloaded.
	for p in "linux-kbuild-$A64_KSERIES" "linux-source-$A64_KSERIES"; do
		f=$(compgen -G "$CACHE/kernel-*-cloud-amd64_$A64_KVER/debs/${p}_*.deb" | head -n 1) || true
		if [ -n "$f" ]; then ln -f "$f" "$kdir/download/" 2>/dev/null || cp "$f" "$kdir/download/"; else want+=("$p=$A64_KVER"); fi
	done
	[ ${#want[@]} = 0 ] || (cd "$kdir/download" && apt_download "${want[@]}")
	mv "$kdir/download" "$kdir/debs"
	for p in "linux-image-$A64_KREL" "linux-headers-$A64_KREL" "linux-headers-$A64_KABI-common" \
		"linux-kbuild-$A64_KSERIES" busybox-static; do
		dpkg-deb -x "$kdir/debs/${p}_"*.deb "$work/root"
	done
	# Debian's arm64 "vmlinuz" is the uncompressed arm64 Image, which QEMU's -kernel boots directly.
	cp "$work/root/boot/vmlinuz-$A64_KREL" "$A64_VMLINUZ"
	cp "$work/root/bin/busybox" "$A64_BUSYBOX"
	# Stock modules: the SMMUv3 driver is built in, so type1 needs nothing rebuilt. irqbypass is built in on
	# arm64 (KVM), so it is not in the package; lab/guest/init skips modules it does not find.
	mkdir -p "$A64_KO_DIR/type1" "$A64_KO_DIR/noiommu" "$A64_KO_DIR/extra"
	for m in vfio_virqfd vfio vfio_iommu_type1 vfio-pci-core vfio-pci; do
		f=$(find "$work/root/lib/modules/$A64_KREL/kernel" -name "$m.ko" | head -n 1)
		[ -n "$f" ] || die "$m.ko not in linux-image-$A64_KREL (compressed modules are not handled)"
		cp "$f" "$A64_KO_DIR/type1/"
	done
	for m in uio uio_pci_generic; do
		f=$(find "$work/root/lib/modules/$A64_KREL/kernel/drivers/uio" -name "$m.ko" | head -n 1)
		[ -n "$f" ] || die "$m.ko not in linux-image-$A64_KREL"
		cp "$f" "$A64_KO_DIR/extra/"
	done
	arm64_modules "$kdir" "$work"
	rm -rf "$work" "$kdir/debs"/linux-{source,kbuild}-*.deb
	touch "$kdir/.complete"
	log_step "arm64 kernel $A64_KREL: ready in $(secs "$t0" "$(now)")s"
	for f in "$A64_ROOT"/kernel-*; do # a new point release has its own folder: drop the older ones
		[ "$f" = "$kdir" ] || rm -rf "$f"
	done
	exec {lock}>&-
}

# arm64_modules KDIR WORK: the x86 lab's module builds (prepare.sh), cross-compiled: the vfio sources from
# linux-source with CONFIG_VFIO_NOIOMMU, and udmabuf with the lab's patch (udmabuf_patch), built against the arm64
# headers with the amd64 kbuild tools (the headers' scripts/ links to them) and aarch64-linux-gnu-gcc-12 (the
# compiler .kernelvariables names, with CROSS_COMPILE), so vermagic and symbol versions are the arm64 kernel's.
# -> $A64_KO_DIR/noiommu, $A64_KO_DIR/extra/udmabuf.ko
arm64_modules() {
	local kdir=$1 work=$2 m
	dpkg-deb --fsys-tarfile "$kdir/debs/linux-source-${A64_KSERIES}_"*.deb |
		tar -x -C "$work" --wildcards "*/linux-source-$A64_KSERIES.tar.xz"
	tar -xf "$work/usr/src/linux-source-$A64_KSERIES.tar.xz" -C "$work" --use-compress-program='xz -T0' \
		--wildcards --no-wildcards-match-slash \
		"linux-source-$A64_KSERIES/drivers/vfio/Makefile" "linux-source-$A64_KSERIES/drivers/vfio/*.[ch]" \
		"linux-source-$A64_KSERIES/drivers/vfio/pci/Makefile" "linux-source-$A64_KSERIES/drivers/vfio/pci/*.[ch]" \
		"linux-source-$A64_KSERIES/drivers/dma-buf/udmabuf.c"
	rm -rf "$work/usr"
	local mod=$work/linux-source-$A64_KSERIES/drivers/vfio hdr=$work/root/usr/src/linux-headers-$A64_KREL
	printf '\n# pcibench lab: no-IOMMU support (Debian builds without it)\nccflags-y += -DCONFIG_VFIO_NOIOMMU=1\n' |
		tee -a "$mod/Makefile" >>"$mod/pci/Makefile"
	sed -i "s|^include /usr/src/|include $work/root/usr/src/|" "$hdr/Makefile"
	grep -q "^include $work/" "$hdr/Makefile" || die "unexpected $hdr/Makefile: $(cat "$hdr/Makefile")"
	run_logged "$work/build.log" make -C "$hdr" M="$mod" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- \
		-j"$(nproc)" modules
	local ub=$work/udmabuf
	mkdir -p "$ub"
	mv "$work/linux-source-$A64_KSERIES/drivers/dma-buf/udmabuf.c" "$ub/"
	udmabuf_patch "$ub/udmabuf.c"
	echo 'obj-m += udmabuf.o' >"$ub/Makefile"
	run_logged "$work/build-udmabuf.log" make -C "$hdr" M="$ub" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- modules
	aarch64-linux-gnu-strip --strip-debug -o "$A64_KO_DIR/extra/udmabuf.ko" "$ub/udmabuf.ko"
	for m in vfio_virqfd vfio vfio_iommu_type1 pci/vfio-pci-core pci/vfio-pci; do
		[ -f "$mod/$m.ko" ] || die "the arm64 no-IOMMU build produced no $m.ko (see $work/build.log)"
		aarch64-linux-gnu-strip --strip-debug -o "$A64_KO_DIR/noiommu/${m#pci/}.ko" "$mod/$m.ko"
	done
	grep -q enable_unsafe_noiommu_mode "$A64_KO_DIR/noiommu/vfio.ko" ||
		die "rebuilt arm64 vfio.ko lacks enable_unsafe_noiommu_mode"
}

# build_arm64_unit_tests: the library's unit tests built for aarch64 exactly as scripts/cross builds them (default
# target folder, .cargo/cross.toml's flags), so after it this is a cache hit; the guest runs the mmio ones
# (scenario mmio_unit_tests) against the real kernel's view of the CPU.
build_arm64_unit_tests() {
	local t0 exe
	t0=$(now)
	exe=$(cd "$REPO" && cargo --config .cargo/cross.toml test --no-run --message-format=json -p pcibench --lib \
		--target aarch64-unknown-linux-gnu 2>"$RUN/cargo-tests-aarch64.log" |
		sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1) || true
	if [ -z "$exe" ] || [ ! -x "$exe" ]; then
		tail -n 40 "$RUN/cargo-tests-aarch64.log" | sed 's/^/    /' >&2
		die "cargo built no aarch64 unit-test binary (log: $RUN/cargo-tests-aarch64.log)"
	fi
	aarch64-linux-gnu-strip --strip-debug -o "$RUN/pcibench-tests-aarch64" "$exe"
	log_step "pcibench unit tests (aarch64): ready in $(secs "$t0" "$(now)")s"
}
