# Sourced by lab/run after host/kdrv.sh: the guest kernel of machine q35-vu510, whose guest runs the Micro Memory
# card's own Linux block driver, drivers/block/umem.c, against the served `sim-nvram` (seed 001's MM-5425CN; issue
# 49). umem.c left mainline after v5.9 (Debian 12's 6.1 and the backports' 6.12 have no umem.c); Debian 11's
# linux-source-5.10 still carries it, and its cloud kernel boots under the same QEMU. Nothing is installed on the
# host: apt runs with lists of its own under $CACHE/kernel510/apt (bullseye main from the host's mirror: frozen, so
# the lists, 8 MB, are fetched once), downloads the cloud image, its headers, kbuild and the source (~155 MB, deleted
# once vmlinuz is out and umem.ko is built: 7 MB stay), and umem.ko is built out of tree from umem.c and umem.h
# as the source has them, with the host's gcc-12 (Debian 11 built its kernel with gcc-10, which Debian 12 lacks;
# umem.c builds without a warning under 12).
#   prepare_k510        -> $K510_VMLINUZ, $K510_KO (umem.ko)
#   k510_initrd OUT     the x86-64 initramfs with /lib/umem/umem.ko appended (booted with lab_vfio=none)

K510_ROOT=$CACHE/kernel510
K510_APT=$K510_ROOT/apt
K510_SUITE=bullseye
machine_k510() { [ "$1" = q35-vu510 ]; }

# Bullseye is frozen: its lists are fetched once.
resolve_k510() {
	local dep
	dep=$(kapt_resolve "$K510_APT" "$K510_SUITE") ||
		die "cannot resolve the kernel linux-image-cloud-amd64 depends on in $K510_SUITE"
	read -r K510_REL K510_VER <<<"$dep"
	K510_ABI=${K510_REL%-cloud-amd64}
	K510_SERIES=$(echo "$K510_REL" | cut -d. -f1,2)
}

prepare_k510() {
	local lock
	exec {lock}>"$CACHE/.lock"
	flock "$lock"
	resolve_k510
	K510_DIR=$K510_ROOT/kernel-${K510_REL}_$K510_VER
	K510_VMLINUZ=$K510_DIR/vmlinuz K510_KO=$K510_DIR/ko
	if [ -f "$K510_DIR/.complete" ]; then
		log_step "kernel $K510_REL ($K510_VER, $K510_SUITE): cached"
		exec {lock}>&-
		return 0
	fi
	log_step "kernel $K510_REL ($K510_VER, $K510_SUITE): fetching, building umem.ko from linux-source-$K510_SERIES"
	local t0
	t0=$(now)
	kapt_debs "$K510_DIR" "$K510_APT" "$K510_VER" apt-download-k510.log "linux-image-$K510_REL" \
		"linux-headers-$K510_REL" "linux-headers-$K510_ABI-common" "linux-kbuild-$K510_SERIES" "linux-source-$K510_SERIES"
	local work=$K510_DIR/work src hdr
	rm -rf "$work" "$K510_KO"
	mkdir -p "$work/img" "$work/umem" "$K510_KO"
	dpkg-deb --fsys-tarfile "$K510_DIR/debs/linux-image-${K510_REL}_"*.deb |
		tar -x -C "$work/img" "./boot/vmlinuz-$K510_REL"
	dpkg-deb -x "$K510_DIR/debs/linux-source-${K510_SERIES}_"*.deb "$work/src"
	src=linux-source-$K510_SERIES/drivers/block
	tar -xf "$work/src/usr/src/linux-source-$K510_SERIES.tar.xz" -C "$work" --use-compress-program='xz -T0' \
		"$src/umem.c" "$src/umem.h"
	cp "$work/$src/umem.c" "$work/$src/umem.h" "$work/umem/"
	echo 'obj-m += umem.o' >"$work/umem/Kbuild"
	hdr=$(kheaders "$work" "$K510_DIR/debs" "$K510_REL" "linux-headers-$K510_REL" "linux-headers-$K510_ABI-common" \
		"linux-kbuild-$K510_SERIES")
	run_logged "$work/build.log" make -C "$hdr" M="$work/umem" -j"$(nproc)" CC=gcc-12 modules
	strip --strip-debug -o "$K510_KO/umem.ko" "$work/umem/umem.ko"
	mv "$work/img/boot/vmlinuz-$K510_REL" "$K510_VMLINUZ"
	rm -rf "$work"
	rm -rf "$K510_DIR/debs" # needed once (155 MB): nothing else is built for this kernel
	touch "$K510_DIR/.complete"
	log_step "kernel $K510_REL: ready in $(secs "$t0" "$(now)")s"
	for p in "$K510_ROOT"/kernel-*; do
		[ "$p" = "$K510_DIR" ] || rm -rf "$p"
	done
	exec {lock}>&-
}

# k510_initrd OUT: the x86-64 initramfs (the same /init, busybox and scenarios) with umem.ko appended as
# /lib/umem/umem.ko.
k510_initrd() {
	local out=$1 root=$RUN/initramfs-k510
	rm -rf "$root"
	mkdir -p "$root/lib/umem"
	cp "$K510_KO/umem.ko" "$root/lib/umem/"
	{
		cat "$INITRD_x86_64"
		(cd "$root" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -1
	} >"$out"
}
