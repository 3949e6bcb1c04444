# Sourced by lab/run: the 6.12 guest kernel of machine q35-vu612 (host/served.sh), whose guest runs AMD's own
# XDMA and QDMA dmaengine drivers (Linux drivers/dma/xilinx/xdma.c since 6.3, drivers/dma/amd/qdma/ since 6.11)
# against the served simulated cards, through the glue module lab/kmod/pcibench_kdrv.c (issue 49). Debian 12's
# 6.1 kernel has neither driver; bookworm-backports carries linux-image-6.12.*+deb12-cloud-amd64 and
# linux-source-6.12. Nothing is installed on the host: apt runs with a sources list and package lists of its own
# under $CACHE/kernel612/apt (bookworm-backports from the host's mirror, amd64, an empty dpkg status), downloads the
# image, its headers, kbuild and the source (~202 MB; the image and the source, 185 MB, are deleted once used), and
# unpacks them with dpkg-deb -x. The cloud config builds no DMA engine (CONFIG_DMADEVICES unset, so no dmaengine
# core, no virtual channels) and no regmap, so those are built as modules too, from the same source, next to the two
# drivers:
#   dmaengine.ko   drivers/dma/dmaengine.c + virt-dma.c (one module: its two initcalls made one)
#   regmap.ko      drivers/base/regmap/ core, caches, debugfs and regmap-mmio
#   xdma.ko        drivers/dma/xilinx/xdma.c, unchanged
#   amd-qdma.ko    drivers/dma/amd/qdma/, unchanged
#   pcibench_kdrv.ko   lab/kmod/pcibench_kdrv.c (rebuilt when it changes)
# all built with the config symbols the cloud config lacks defined on the command line (as the no-IOMMU vfio
# modules are, host/prepare.sh), so the headers' dmaengine.h and regmap.h declare the real API, not the stubs.
# Only the machine that boots this kernel prepares it:
#   prepare_k612        -> $K612_VMLINUZ, $K612_KO (the modules above)
#   k612_initrd OUT     the x86-64 initramfs with /lib/kdrv/*.ko appended (the 6.1 vfio modules in it are not
#                       loaded: the machine boots with lab_vfio=none)

K612_ROOT=$CACHE/kernel612
K612_APT=$K612_ROOT/apt
K612_SUITE=bookworm-backports
# The modules the guest loads, in load order.
K612_MODULES=(dmaengine regmap xdma amd-qdma pcibench_kdrv)
machine_k612() { [ "$1" = q35-vu612 ]; }

# kapt DIR TOOL ARGS...: apt-get / apt-cache with the sources list, package lists and empty dpkg status under DIR
# (a kernel's own: the host's apt and dpkg are left alone). Also used by host/umem.sh.
kapt() {
	local dir=$1 tool=$2
	shift 2
	"$tool" -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts="$dir/sources.list.d" \
		-o Dir::Etc::Preferences="$dir/preferences" -o Dir::Etc::PreferencesParts="$dir/preferences.d" \
		-o Dir::State::Lists="$dir/lists" -o Dir::State::status="$dir/status" \
		-o Dir::Cache="$dir/cache" -o APT::Architecture=amd64 -o APT::Architectures=amd64 \
		-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false -o Acquire::Languages=none \
		-o APT::Sandbox::User=root "$@"
}

# kapt_update DIR SUITE: DIR's sources list names SUITE (main) on the host's mirror; its lists are fetched.
kapt_update() {
	local dir=$1 suite=$2
	log_step "apt-get update ($suite package lists, $dir)"
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/sources.list.d" "$dir/preferences.d"
	: >"$dir/status"
	: >"$dir/preferences"
	printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' "$(q11_mirror)" "$suite" \
		>"$dir/sources.list"
	run_logged "$RUN/apt-update-$suite.log" kapt "$dir" apt-get update
}

# kapt_kernel DIR: "REL VERSION" of the cloud kernel linux-image-cloud-amd64 depends on in DIR's lists.
kapt_kernel() {
	kapt "$1" apt-cache show --no-all-versions linux-image-cloud-amd64 2>/dev/null |
		sed -n 's/^Depends: .*linux-image-\([0-9][^ ]*-cloud-amd64\) (= \([^)]*\)).*/\1 \2/p' | head -n 1
}

# kapt_resolve DIR SUITE [DAYS]: "REL VERSION" of the cloud kernel in DIR's lists (kapt_kernel), the lists fetched
# first when there are none or (given DAYS) none newer than DAYS days (a suite that still moves). Also umem.sh's.
kapt_resolve() {
	local dep= lists
	if [ -n "${3:-}" ]; then
		lists=$(find "$1/lists" -maxdepth 1 -name '*_InRelease' -mtime "-$3" 2>/dev/null)
	else
		lists=$(compgen -G "$1/lists/*_InRelease") || true
	fi
	[ -z "$lists" ] || dep=$(kapt_kernel "$1") || true
	if [ -z "$dep" ]; then
		kapt_update "$1" "$2" >&2 # its progress line, not the answer
		dep=$(kapt_kernel "$1") || true
	fi
	[ -n "$dep" ] || return 1
	echo "$dep"
}

# kapt_debs DIR APT VER LOG PKG...: the packages PKG at version VER in DIR/debs, those missing downloaded with APT's
# lists (log: $RUN/LOG) via a scratch folder, so an interrupted download leaves no partial .deb. Also umem.sh's.
kapt_debs() {
	local dir=$1 apt=$2 ver=$3 log=$4 p want=()
	shift 4
	mkdir -p "$dir/debs"
	for p in "$@"; do
		compgen -G "$dir/debs/${p}_*.deb" >/dev/null || want+=("$p=$ver")
	done
	[ ${#want[@]} -gt 0 ] || return 0
	rm -rf "$dir/download"
	mkdir -p "$dir/download"
	(cd "$dir/download" && run_logged "$RUN/$log" kapt "$apt" apt-get download "${want[@]}")
	mv "$dir/download"/*.deb "$dir/debs/"
	rmdir "$dir/download"
}

# The cloud kernel the backports' metapackage depends on now: K612_REL (6.12.N+deb12-cloud-amd64), K612_VER.
# Lists older than a week are refreshed (~1 s, 0.7 MB), so a new backport is picked up.
resolve_k612() {
	local dep
	dep=$(kapt_resolve "$K612_APT" "$K612_SUITE" 7) ||
		die "cannot resolve the kernel linux-image-cloud-amd64 depends on in $K612_SUITE"
	read -r K612_REL K612_VER <<<"$dep"
	K612_ABI=${K612_REL%-cloud-amd64}
	K612_SERIES=$(echo "$K612_REL" | cut -d. -f1,2)
}

# kheaders DIR DEBS REL PKG...: the headers and kbuild packages PKG (from the folder DEBS) unpacked into DIR/root,
# the headers' Makefile pointed at them; prints the headers' folder (of kernel REL). Also used by host/umem.sh.
kheaders() {
	local dir=$1 debs=$2 rel=$3 p hdr
	shift 3
	for p in "$@"; do
		dpkg-deb -x "$debs/${p}_"*.deb "$dir/root"
	done
	hdr=$dir/root/usr/src/linux-headers-$rel
	# The headers' Makefile includes the common half by absolute path under /usr/src: point it at ours.
	sed -i "s|^include /usr/src/|include $dir/root/usr/src/|" "$hdr/Makefile"
	grep -q "^include $dir/" "$hdr/Makefile" || die "unexpected $hdr/Makefile: $(cat "$hdr/Makefile")"
	echo "$hdr"
}

# k612_make HDR DIR LOG [VAR=VALUE...]: build the modules of DIR's Kbuild against the headers HDR. The cloud
# config's module BTF needs pahole and the kernel's vmlinux, which these builds go without.
k612_make() {
	local hdr=$1 dir=$2 log=$3
	shift 3
	run_logged "$log" make -C "$hdr" M="$dir" -j"$(nproc)" CONFIG_DEBUG_INFO_BTF_MODULES= "$@" modules
}

# The config symbols the cloud kernel lacks, for every module built here (dmaengine.h and regmap.h are stubs
# without them).
K612_CFLAGS='-DCONFIG_DMA_ENGINE=1 -DCONFIG_DMA_VIRTUAL_CHANNELS=1 -DCONFIG_REGMAP=1 -DCONFIG_REGMAP_MMIO=1'

# The vendor's drivers and what they need, from linux-source: K612_KO/{dmaengine,regmap,xdma,amd-qdma}.ko.
k612_vendor_modules() {
	local work=$1 src=$1/linux-source-$K612_SERIES b=$1/vendor hdr
	dpkg-deb -x "$K612_DIR/debs/linux-source-${K612_SERIES}_"*.deb "$work/src"
	tar -xf "$work/src/usr/src/linux-source-$K612_SERIES.tar.xz" -C "$work" --use-compress-program='xz -T0' \
		--wildcards --no-wildcards-match-slash \
		"linux-source-$K612_SERIES/drivers/dma/dmaengine.[ch]" "linux-source-$K612_SERIES/drivers/dma/virt-dma.[ch]" \
		"linux-source-$K612_SERIES/drivers/dma/xilinx/xdma*" "linux-source-$K612_SERIES/drivers/dma/amd/qdma/*.[ch]" \
		"linux-source-$K612_SERIES/drivers/base/regmap/*.[ch]"
	rm -rf "$work/src"
	mkdir -p "$b/core" "$b/regmap" "$b/xdma" "$b/qdma"
	cp "$src"/drivers/dma/{dmaengine.c,dmaengine.h,virt-dma.c,virt-dma.h} "$b/core/"
	cp "$src"/drivers/base/regmap/{regmap.c,regcache.c,regcache-rbtree.c,regcache-flat.c,regcache-maple.c} "$b/regmap/"
	cp "$src"/drivers/base/regmap/{regmap-debugfs.c,regmap-mmio.c,internal.h,trace.h} "$b/regmap/"
	cp "$src"/drivers/dma/xilinx/{xdma.c,xdma-regs.h} "$b/xdma/"
	cp "$src"/drivers/dma/amd/qdma/*.[ch] "$b/qdma/"
	# dmaengine.c has two arch_initcalls, and a module has one init: the channel table's runs first in it.
	sed -i -e 's/^arch_initcall(dma_channel_table_init);$//' \
		-e 's/^\tint err = dmaengine_init_unmap_pool();$/\tint err = dma_channel_table_init();\n\n\tif (!err)\n\t\terr = dmaengine_init_unmap_pool();/' \
		"$b/core/dmaengine.c"
	grep -q 'int err = dma_channel_table_init();' "$b/core/dmaengine.c" ||
		die "drivers/dma/dmaengine.c did not take the lab's patch (a new kernel?): see $b/core/dmaengine.c"
	# Built in, these two need no license tag; as modules they do.
	echo 'MODULE_LICENSE("GPL");' >>"$b/core/dmaengine.c"
	echo 'MODULE_LICENSE("GPL");' >>"$b/regmap/regmap.c"
	sed -i 's|"\.\./virt-dma\.h"|"../core/virt-dma.h"|' "$b/xdma/xdma.c"
	sed -i 's|"\.\./\.\./virt-dma\.h"|"../core/virt-dma.h"|' "$b/qdma/qdma.h"
	cat >"$b/Kbuild" <<EOF
ccflags-y += $K612_CFLAGS
obj-m += dmaengine.o regmap.o xdma.o amd-qdma.o
dmaengine-y := core/dmaengine.o core/virt-dma.o
regmap-y := regmap/regmap.o regmap/regcache.o regmap/regcache-rbtree.o regmap/regcache-flat.o \\
	regmap/regcache-maple.o regmap/regmap-debugfs.o regmap/regmap-mmio.o
# For include/trace/define_trace.h to find regmap's trace.h (drivers/base/regmap/Makefile does the same).
CFLAGS_regmap/regmap.o := -I\$(src)/regmap
xdma-y := xdma/xdma.o
amd-qdma-y := qdma/qdma.o qdma/qdma-comm-regs.o
EOF
	hdr=$(kheaders "$work" "$K612_DIR/debs" "$K612_REL" "linux-headers-$K612_REL" "linux-headers-$K612_ABI-common" "linux-kbuild-$K612_ABI")
	k612_make "$hdr" "$b" "$work/build-vendor.log"
	local m
	for m in dmaengine regmap xdma amd-qdma; do
		strip --strip-debug -o "$K612_KO/$m.ko" "$b/$m.ko"
	done
	# What they export (dmaengine's API), for the glue's build (KBUILD_EXTRA_SYMBOLS).
	cp "$b/Module.symvers" "$K612_KO/Module.symvers"
}

# The glue module, rebuilt when lab/kmod changed (its sources' digest beside it).
k612_glue() {
	local sum work hdr
	sum=$(cat "$LAB"/kmod/*.c | sha256sum | cut -d' ' -f1)
	[ -f "$K612_KO/pcibench_kdrv.ko" ] && [ "$(cat "$K612_KO/pcibench_kdrv.sum" 2>/dev/null)" = "$sum" ] && return 0
	log_step "building lab/kmod/pcibench_kdrv.ko for $K612_REL"
	work=$(mktemp -d "$RUN/glue.XXXXXX") # under the run's folder: a failed build leaves no 90 MB of headers behind
	hdr=$(kheaders "$work" "$K612_DIR/debs" "$K612_REL" "linux-headers-$K612_REL" "linux-headers-$K612_ABI-common" "linux-kbuild-$K612_ABI")
	mkdir -p "$work/kmod"
	cp "$LAB"/kmod/*.c "$work/kmod/"
	printf 'ccflags-y += %s\nobj-m += pcibench_kdrv.o\n' "$K612_CFLAGS" >"$work/kmod/Kbuild"
	k612_make "$hdr" "$work/kmod" "$work/build-glue.log" KBUILD_EXTRA_SYMBOLS="$K612_KO/Module.symvers"
	strip --strip-debug -o "$K612_KO/pcibench_kdrv.ko" "$work/kmod/pcibench_kdrv.ko"
	echo "$sum" >"$K612_KO/pcibench_kdrv.sum"
	rm -rf "$work"
}

prepare_k612() {
	local lock
	exec {lock}>"$CACHE/.lock"
	flock "$lock"
	resolve_k612
	K612_DIR=$K612_ROOT/kernel-${K612_REL}_$K612_VER
	K612_VMLINUZ=$K612_DIR/vmlinuz K612_KO=$K612_DIR/ko
	# (A folder from before the modules' symbol list was kept is rebuilt.)
	if [ -f "$K612_DIR/.complete" ] && [ -f "$K612_KO/Module.symvers" ]; then
		log_step "kernel $K612_REL ($K612_VER, $K612_SUITE): cached"
	else
		log_step "kernel $K612_REL ($K612_VER, $K612_SUITE): fetching, building dmaengine, regmap, xdma, amd-qdma"
		local t0
		t0=$(now)
		kapt_debs "$K612_DIR" "$K612_APT" "$K612_VER" apt-download-k612.log "linux-image-$K612_REL" \
			"linux-headers-$K612_REL" "linux-headers-$K612_ABI-common" "linux-kbuild-$K612_ABI" "linux-source-$K612_SERIES"
		local work=$K612_DIR/work
		rm -rf "$work" "$K612_KO"
		mkdir -p "$work/img" "$K612_KO"
		dpkg-deb --fsys-tarfile "$K612_DIR/debs/linux-image-${K612_REL}_"*.deb |
			tar -x -C "$work/img" "./boot/vmlinuz-$K612_REL"
		k612_vendor_modules "$work"
		mv "$work/img/boot/vmlinuz-$K612_REL" "$K612_VMLINUZ"
		rm -rf "$work"
		# The image and the source are needed once (185 MB): the glue builds against the headers alone.
		rm -f "$K612_DIR/debs/linux-source-${K612_SERIES}_"*.deb "$K612_DIR/debs/linux-image-${K612_REL}_"*.deb
		touch "$K612_DIR/.complete"
		log_step "kernel $K612_REL: ready in $(secs "$t0" "$(now)")s"
		for p in "$K612_ROOT"/kernel-*; do # a newer backport has its own folder: drop the older ones
			[ "$p" = "$K612_DIR" ] || rm -rf "$p"
		done
	fi
	k612_glue
	exec {lock}>&-
}

# k612_initrd OUT: the x86-64 initramfs (the same /init, busybox and scenarios) with the 6.12 modules appended
# as /lib/kdrv/*.ko, with the scenario helpers lab/guest/kdrv.sh as /lab/kdrv.sh (the kernel unpacks each cpio
# archive in turn).
k612_initrd() {
	local out=$1 root=$RUN/initramfs-k612 m
	rm -rf "$root"
	mkdir -p "$root/lib/kdrv" "$root/lab"
	for m in "${K612_MODULES[@]}"; do cp "$K612_KO/$m.ko" "$root/lib/kdrv/"; done
	cp "$LAB/guest/kdrv.sh" "$root/lab/"
	{
		cat "$INITRD_x86_64"
		(cd "$root" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -1
	} >"$out"
}
