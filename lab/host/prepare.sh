# Sourced by lab/run: everything a guest boot needs, built once and cached under $CACHE.
#   ensure_packages   host packages (QEMU, busybox, the module build tools)
#   prepare_kernel    Debian cloud kernel + stock vfio modules + no-IOMMU vfio modules  -> $VMLINUZ, $KO_DIR
#   build_pcibench    static pcibench (cargo)                                           -> $PCIBENCH
#   pack_initramfs    busybox, pcibench, modules, guest scripts                         -> $1 (cpio newc + gzip)

APT_UPDATED=

apt_update() {
	[ -z "$APT_UPDATED" ] || return 0
	log_step "apt-get update"
	run_logged "$RUN/apt-update.log" apt-get update
	APT_UPDATED=1
}

# Host tools: QEMU, busybox for the guest, cpio, and what Debian's kbuild needs to build out-of-tree modules.
HOST_PACKAGES=(qemu-system-x86 busybox-static cpio xz-utils gcc-12 make binutils libelf1)

ensure_packages() {
	local missing=() p
	for p in "${HOST_PACKAGES[@]}"; do
		[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
	done
	command -v python3 >/dev/null || missing+=(python3)
	[ ${#missing[@]} -gt 0 ] || return 0
	[ "$(id -u)" = 0 ] || die "missing packages ${missing[*]} and not root: install them first"
	log_step "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$RUN/apt-install.log" 2>&1; then
		apt_update # the package lists may be missing or stale
		run_logged "$RUN/apt-install.log" apt-get install -y --no-install-recommends "${missing[@]}"
	fi
}

# Resolve the cloud kernel the archive offers now from the metapackage's dependency (one apt-cache call:
# each costs ~0.4 s): KREL (6.1.0-NN-cloud-amd64), KVER (its package version), KABI (6.1.0-NN), KSERIES (6.1).
kernel_dep() {
	apt-cache show --no-all-versions linux-image-cloud-amd64 2>/dev/null |
		sed -n 's/^Depends: .*linux-image-\([0-9][^ ]*-cloud-amd64\) (= \([^)]*\)).*/\1 \2/p' | head -n 1
}
resolve_kernel() {
	local dep
	dep=$(kernel_dep) || true
	if [ -z "$dep" ]; then
		apt_update
		dep=$(kernel_dep) || true
	fi
	[ -n "$dep" ] || die "cannot resolve the kernel package linux-image-cloud-amd64 depends on"
	read -r KREL KVER <<<"$dep"
	KABI=${KREL%-cloud-amd64}
	KSERIES=$(echo "$KREL" | cut -d. -f1,2)
}

# apt-get download PKG=VER... into the current directory, retrying once after an update (stale lists 404).
apt_download() {
	local log=$RUN/apt-download.log
	# -o APT::Sandbox::User=root: the cache folder need not be readable by the _apt user.
	if ! apt-get download -o APT::Sandbox::User=root "$@" >"$log" 2>&1; then
		apt_update
		run_logged "$log" apt-get download -o APT::Sandbox::User=root "$@"
	fi
}

# Sets VMLINUZ and KO_DIR (KO_DIR/type1 and KO_DIR/noiommu each hold a complete set of vfio modules).
prepare_kernel() {
	# Another lab run may be filling the same cache: one at a time (util-linux flock).
	local lock
	exec {lock}>"$CACHE/.lock"
	flock "$lock"
	resolve_kernel
	local kdir=$CACHE/kernel-${KREL}_$KVER
	VMLINUZ=$kdir/vmlinuz KO_DIR=$kdir/ko
	if [ -f "$kdir/.complete" ]; then
		log_step "kernel $KREL ($KVER): cached"
		exec {lock}>&-
		return 0
	fi
	log_step "kernel $KREL ($KVER): fetching, building the no-IOMMU vfio modules"
	local t0
	t0=$(now)
	mkdir -p "$kdir/debs"
	local pkgs=("linux-image-$KREL" "linux-headers-$KREL" "linux-headers-$KABI-common" "linux-kbuild-$KSERIES"
		"linux-source-$KSERIES") want=() p
	for p in "${pkgs[@]}"; do
		compgen -G "$kdir/debs/${p}_*.deb" >/dev/null || want+=("$p=$KVER")
	done
	if [ ${#want[@]} -gt 0 ]; then # via a scratch folder, so an interrupted download leaves no partial .deb
		rm -rf "$kdir/download"
		mkdir -p "$kdir/download"
		(cd "$kdir/download" && apt_download "${want[@]}")
		mv "$kdir/download"/*.deb "$kdir/debs/"
		rmdir "$kdir/download"
	fi
	local work=$kdir/work
	rm -rf "$work" "$KO_DIR"
	mkdir -p "$work/root" "$KO_DIR/type1" "$KO_DIR/noiommu"
	for p in "${pkgs[@]}"; do
		[ "$p" = "linux-source-$KSERIES" ] || dpkg-deb -x "$kdir/debs/${p}_"*.deb "$work/root"
	done

	# Stock modules (q35-iommu, type1). vfio_virqfd is its own module in 6.1; later kernels fold it into vfio.
	local m f
	cp "$work/root/boot/vmlinuz-$KREL" "$work/vmlinuz"
	for m in irqbypass vfio_virqfd vfio vfio_iommu_type1 vfio-pci-core vfio-pci; do
		f=$(find "$work/root/lib/modules/$KREL/kernel" -name "$m.ko" | head -n 1)
		if [ -z "$f" ]; then
			[ "$m" = vfio_virqfd ] && continue
			die "$m.ko not in linux-image-$KREL (compressed modules are not handled)"
		fi
		cp "$f" "$KO_DIR/type1/"
	done

	# No-IOMMU modules (pc): Debian builds without CONFIG_VFIO_NOIOMMU, so rebuild drivers/vfio with it.
	# Only the vfio sources are unpacked from the source tarball.
	dpkg-deb -x "$kdir/debs/linux-source-${KSERIES}_"*.deb "$work/src"
	tar -xf "$work/src/usr/src/linux-source-$KSERIES.tar.xz" -C "$work" --use-compress-program='xz -T0' \
		--wildcards --no-wildcards-match-slash \
		"linux-source-$KSERIES/drivers/vfio/Makefile" "linux-source-$KSERIES/drivers/vfio/*.[ch]" \
		"linux-source-$KSERIES/drivers/vfio/pci/Makefile" "linux-source-$KSERIES/drivers/vfio/pci/*.[ch]"
	rm -rf "$work/src"
	local mod=$work/linux-source-$KSERIES/drivers/vfio
	# Subdirectories other than pci/ (mdev, platform, mlx5, hisilicon, ...) were not extracted; their
	# Makefile entries are gated by config options the cloud kernel does not set.
	printf '\n# pcibench lab: no-IOMMU support (Debian builds without it)\nccflags-y += -DCONFIG_VFIO_NOIOMMU=1\n' |
		tee -a "$mod/Makefile" >>"$mod/pci/Makefile"
	local hdr=$work/root/usr/src/linux-headers-$KREL
	# The headers' Makefile includes the common half by absolute path under /usr/src: point it at ours.
	sed -i "s|^include /usr/src/|include $work/root/usr/src/|" "$hdr/Makefile"
	grep -q "^include $work/" "$hdr/Makefile" || die "unexpected $hdr/Makefile: $(cat "$hdr/Makefile")"
	run_logged "$work/build.log" make -C "$hdr" M="$mod" -j"$(nproc)" modules
	for m in vfio_virqfd vfio vfio_iommu_type1 pci/vfio-pci-core pci/vfio-pci; do
		if [ -f "$mod/$m.ko" ]; then
			strip --strip-debug -o "$KO_DIR/noiommu/${m#pci/}.ko" "$mod/$m.ko"
		elif [ -f "$KO_DIR/type1/${m#pci/}.ko" ]; then
			die "the no-IOMMU build produced no $m.ko (see $work/build.log)"
		fi
	done
	cp "$KO_DIR/type1/irqbypass.ko" "$KO_DIR/noiommu/"
	grep -q enable_unsafe_noiommu_mode "$KO_DIR/noiommu/vfio.ko" ||
		die "rebuilt vfio.ko lacks enable_unsafe_noiommu_mode"

	mv "$work/vmlinuz" "$VMLINUZ"
	rm -rf "$work"
	touch "$kdir/.complete"
	log_step "kernel $KREL: ready in $(secs "$t0" "$(now)")s"
	# A new point release has its own folder: drop the older ones.
	for p in "$CACHE"/kernel-*; do
		[ "$p" = "$kdir" ] || rm -rf "$p"
	done
	exec {lock}>&-
}

# A separate target dir keeps this static build from invalidating the normal one.
PCIBENCH_TARGET=x86_64-unknown-linux-gnu
PCIBENCH=$REPO/target/lab/$PCIBENCH_TARGET/release/pcibench

build_pcibench() {
	local t0
	t0=$(now)
	command -v cargo >/dev/null || die "cargo not found: the lab builds pcibench from source"
	RUSTFLAGS='-C target-feature=+crt-static' CARGO_TARGET_DIR="$REPO/target/lab" \
		run_logged "$RUN/cargo.log" cargo build --manifest-path "$REPO/Cargo.toml" --release \
		--target "$PCIBENCH_TARGET" -p pcibench-cli
	[ -x "$PCIBENCH" ] || die "cargo built no $PCIBENCH"
	if readelf -d "$PCIBENCH" | grep -q NEEDED; then die "$PCIBENCH is not statically linked"; fi
	log_step "pcibench: static build ready in $(secs "$t0" "$(now)")s"
}

# extra_modules: uio + uio_pci_generic, a real kernel driver scenarios can bind to a device to prove pcibench
# refuses BARs a driver owns (the cloud kernel has no pci-stub). Not loaded at boot; /lib/extra in the guest.
extra_modules() {
	[ -f "$KO_DIR/extra/uio_pci_generic.ko" ] && return 0
	local tmp deb
	tmp=$(mktemp -d)
	deb=$(compgen -G "$(dirname "$KO_DIR")/debs/linux-image-*.deb" | head -n 1)
	[ -n "$deb" ] || die "no linux-image .deb in the cache for the extra modules"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards '*/drivers/uio/uio.ko' '*/drivers/uio/uio_pci_generic.ko'
	mkdir -p "$KO_DIR/extra"
	find "$tmp" -name 'uio*.ko' -exec cp {} "$KO_DIR/extra/" \;
	rm -rf "$tmp"
	[ -f "$KO_DIR/extra/uio_pci_generic.ko" ] || die "uio_pci_generic.ko not found in $deb"
}

# udmabuf_module: Linux's /dev/udmabuf driver (drivers/dma-buf/udmabuf.c), which the cloud kernel is built
# without (CONFIG_UDMABUF unset), built out of tree from the cached linux-source and headers the way the no-IOMMU
# vfio modules are. Loaded at boot into every guest (/dev/udmabuf for `pcibench buffers`).
udmabuf_module() {
	[ -f "$KO_DIR/extra/udmabuf.ko" ] && return 0
	local kdir work debs hdr lock
	exec {lock}>"$CACHE/.lock"
	flock "$lock" # another lab run may be building it into the same cache
	if [ -f "$KO_DIR/extra/udmabuf.ko" ]; then
		exec {lock}>&-
		return 0
	fi
	log_step "building the udmabuf module (/dev/udmabuf) from linux-source"
	kdir=$(dirname "$KO_DIR")
	debs=$kdir/debs
	work=$(mktemp -d)
	for p in "linux-headers-$KREL" "linux-headers-$KABI-common" "linux-kbuild-$KSERIES" "linux-source-$KSERIES"; do
		compgen -G "$debs/${p}_*.deb" >/dev/null || die "no $p .deb in $debs for the udmabuf module"
		dpkg-deb -x "$debs/${p}_"*.deb "$work/root"
	done
	tar -xf "$work/root/usr/src/linux-source-$KSERIES.tar.xz" -C "$work" --use-compress-program='xz -T0' \
		"linux-source-$KSERIES/drivers/dma-buf/udmabuf.c"
	mkdir -p "$work/udmabuf"
	local c=$work/udmabuf/udmabuf.c
	mv "$work/linux-source-$KSERIES/drivers/dma-buf/udmabuf.c" "$c"
	# Built in, udmabuf checks the memfd with shmem_mapping(), memfd_fcntl(F_GET_SEALS) and hugetlbfs
	# helpers the kernel does not export to modules. This lab build drops those checks (it then takes only
	# shmem memfds on trust: pcibench creates exactly that, sealed with F_SEAL_SHRINK) and imports the DMA_BUF
	# symbol namespace, which the in-tree build does not need.
	sed -i -e 's/if (!shmem_mapping(mapping) \&\& !is_file_hugepages(memfd))/if (0)/' \
		-e 's/seals = memfd_fcntl(memfd, F_GET_SEALS, 0);/seals = SEALS_WANTED;/' \
		-e 's/is_file_hugepages(memfd)/0/g' "$c"
	echo 'MODULE_IMPORT_NS(DMA_BUF);' >>"$c"
	grep -q 'seals = SEALS_WANTED;' "$c" || die "udmabuf.c did not take the lab's patch (a new kernel?): see $c"
	echo 'obj-m += udmabuf.o' >"$work/udmabuf/Makefile"
	hdr=$work/root/usr/src/linux-headers-$KREL
	sed -i "s|^include /usr/src/|include $work/root/usr/src/|" "$hdr/Makefile"
	run_logged "$work/build.log" make -C "$hdr" M="$work/udmabuf" modules
	mkdir -p "$KO_DIR/extra"
	strip --strip-debug -o "$KO_DIR/extra/udmabuf.ko.tmp" "$work/udmabuf/udmabuf.ko"
	mv "$KO_DIR/extra/udmabuf.ko.tmp" "$KO_DIR/extra/udmabuf.ko"
	rm -rf "$work"
	exec {lock}>&-
}

# pack_initramfs OUT: one image serves every boot of this run; the kernel command line picks what to do.
pack_initramfs() {
	local root=$RUN/initramfs
	rm -rf "$root"
	mkdir -p "$root"/{bin,etc,lab/scenarios,lib/vfio,root,home/user}
	cp /bin/busybox "$root/bin/busybox"
	ln -s busybox "$root/bin/sh"
	strip --strip-debug -o "$root/bin/pcibench" "$PCIBENCH"
	cp -r "$KO_DIR/type1" "$KO_DIR/noiommu" "$root/lib/vfio/"
	extra_modules
	udmabuf_module
	cp -r "$KO_DIR/extra" "$root/lib/"
	install -m 755 "$LAB/guest/init" "$root/init"
	cp "$LAB/guest/lib.sh" "$root/lab/"
	cp "$LAB"/scenarios/*.sh "$root/lab/scenarios/"
	printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' >"$root/etc/passwd"
	printf 'root:x:0:\nuser:x:1000:\n' >"$root/etc/group"
	(cd "$root" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$1"
}
