# Sourced by lab/run after prepare.sh: what the aarch64 machine (virt-smmuv3) needs, cached under $CACHE/aarch64.
#   prepare_arm64     Debian's arm64 cloud kernel (Image), its stock vfio and uio modules, arm64 busybox-static
#                                                      -> $A64_VMLINUZ, $A64_KO_DIR, $A64_BUSYBOX
# The host is amd64 and its dpkg is left alone: arm64 packages are resolved and downloaded through apt with a
# package-list folder of its own ($CACHE/aarch64/apt) and arm64 as apt's only architecture, from the host's own
# sources (deb.debian.org on a stock Debian 12). Nothing is installed: the .debs are unpacked with dpkg-deb -x.

# Host tools for this machine: QEMU for Arm, and the cross linker (with glibc's static libc.a for arm64) that
# .cargo/config.toml names for aarch64-unknown-linux-gnu.
ARM64_PACKAGES=(qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu)
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
	if [ -f "$kdir/.complete" ]; then
		log_step "arm64 kernel $A64_KREL ($A64_KVER): cached"
		exec {lock}>&-
		return 0
	fi
	log_step "arm64 kernel $A64_KREL ($A64_KVER): fetching"
	local t0 work=$kdir/work m f
	t0=$(now)
	rm -rf "$kdir"
	mkdir -p "$kdir/download" "$work"
	(cd "$kdir/download" && arm64_download "linux-image-$A64_KREL=$A64_KVER" busybox-static)
	mv "$kdir/download" "$kdir/debs"
	dpkg-deb -x "$kdir/debs/linux-image-${A64_KREL}_"*.deb "$work"
	dpkg-deb -x "$kdir/debs/busybox-static_"*.deb "$work"
	# Debian's arm64 "vmlinuz" is the uncompressed arm64 Image, which QEMU's -kernel boots directly.
	cp "$work/boot/vmlinuz-$A64_KREL" "$A64_VMLINUZ"
	cp "$work/bin/busybox" "$A64_BUSYBOX"
	# Stock modules: the SMMUv3 driver is built in, so type1 needs nothing rebuilt. irqbypass is built in on
	# arm64 (KVM), so it is not in the package; lab/guest/init skips modules it does not find.
	mkdir -p "$A64_KO_DIR/type1" "$A64_KO_DIR/extra"
	for m in vfio_virqfd vfio vfio_iommu_type1 vfio-pci-core vfio-pci; do
		f=$(find "$work/lib/modules/$A64_KREL/kernel" -name "$m.ko" | head -n 1)
		[ -n "$f" ] || die "$m.ko not in linux-image-$A64_KREL (compressed modules are not handled)"
		cp "$f" "$A64_KO_DIR/type1/"
	done
	for m in uio uio_pci_generic; do
		f=$(find "$work/lib/modules/$A64_KREL/kernel/drivers/uio" -name "$m.ko" | head -n 1)
		[ -n "$f" ] || die "$m.ko not in linux-image-$A64_KREL"
		cp "$f" "$A64_KO_DIR/extra/"
	done
	rm -rf "$work"
	touch "$kdir/.complete"
	log_step "arm64 kernel $A64_KREL: ready in $(secs "$t0" "$(now)")s"
	for f in "$A64_ROOT"/kernel-*; do # a new point release has its own folder: drop the older ones
		[ "$f" = "$kdir" ] || rm -rf "$f"
	done
	exec {lock}>&-
}
