# Sourced by lab/run: machine q35-inuse, the in-use and link-health lab (issue 10). Devices the running system
# uses, behind PCIe root ports with set link speeds and widths:
#   rp1 (Gen4 x16): NVMe controller in an NVMe subsystem (nvme-subsys + nvme + nvme-ns, so the kernel's
#                   CONFIG_NVME_MULTIPATH puts the namespace head under /sys/devices/virtual/nvme-subsystem),
#                   ext4 with /hello.txt
#   rp2 (Gen3 x4):  virtio-blk, serial "data", ext4 with /hello.txt
#   rp3 (Gen1 x1):  virtio-blk, serial "swap", blank (the guest makes it swap)
#   rp4 (QEMU's default Gen4 x32): virtio-net on an isolated hub (no backend: nothing leaves QEMU), with a
#                   64 KiB option ROM BAR (a 48 KiB file of our own: Debian's QEMU has no efi-virtio.rom in its path)
#   rp5 (Gen3 x8):  empty
#   root bus:       a plain NVMe controller, serial "tools": ext4 with the virtio modules, lspci and the guest
#                   helpers (lab/guest/inuse.sh), so nothing else of the lab changes for this machine;
#                   00:05.0-00:07.0: virtio-blk, serials "raw1" "raw2" "raw3", raw disks (no filesystem) whose
#                   first line is known: a loop device on one, a process writing to another, the third bound
#                   to vfio-pci with its group held (inuse_open, inuse_vfio_user);
#                   00:08.0: an NVMe controller with SR-IOV (one VF) in a subsystem of its own, no namespace
#                   (inuse_sriov).
# Built once per run, and only when a q35-inuse boot is planned (so the other machines do not pay for it):
# packages e2fsprogs and pciutils, the virtio modules, loop and LIO's core and iblock backstore (with configfs and
# scsi_common: inuse_namespaces exports a disk), nvmet, nvmet-tcp, nvme-fabrics and nvme-tcp (inuse_kernel) from the
# cached cloud kernel .deb (virtio_blk, virtio_net, loop and
# target_core_* are modules there; nvme and ext4 are built in), the disk images.

INUSE_PACKAGES=(e2fsprogs pciutils)
# Load order: each after what it depends on (the .ko's modinfo depends=).
INUSE_MODULES=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk failover
	net_failover virtio_net loop configfs scsi_common target_core_mod target_core_iblock)
# On the tools disk too, loaded only by the scenarios that use them (inuse_modules_extra): the NVMe over Fabrics
# target and the kernel's NVMe/TCP host (inuse_kernel exports a disk and reads it back over 127.0.0.1).
INUSE_EXTRA_MODULES=(nvmet nvmet-tcp nvme-fabrics nvme-tcp)
INUSE_HELLO="pcibench lab: this file lives on the device under test"
# The first line of each raw disk, then its serial (lab/guest/inuse.sh has the same words).
INUSE_RAW="pcibench lab raw disk"
INUSE_RAW_DISKS=(raw1 raw2 raw3)

# inuse_images DIR: the images every boot copies (built once per run, under a lock: boots run in parallel).
inuse_images() {
	local dir=$1 lock
	exec {lock}>"$RUN/inuse.lock"
	flock "$lock"
	if [ -f "$dir/.complete" ]; then
		exec {lock}>&-
		return 0
	fi
	ensure_packages_inuse
	mkdir -p "$dir"
	# The virtio modules, from the kernel package prepare_kernel cached.
	local ko=$KO_DIR/virtio deb tmp m f missing=
	for m in "${INUSE_MODULES[@]}" "${INUSE_EXTRA_MODULES[@]}"; do [ -f "$ko/$m.ko" ] || missing=1; done
	if [ -n "$missing" ]; then
		deb=$(compgen -G "$(dirname "$KO_DIR")/debs/linux-image-*.deb" | head -n 1)
		[ -n "$deb" ] || die "no linux-image .deb in the cache for the virtio modules"
		tmp=$(mktemp -d)
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards '*/drivers/virtio/*.ko' \
			'*/drivers/block/virtio_blk.ko' '*/drivers/net/virtio_net.ko' '*/drivers/net/net_failover.ko' \
			'*/net/core/failover.ko' '*/drivers/block/loop.ko' '*/fs/configfs/configfs.ko' \
			'*/drivers/scsi/scsi_common.ko' '*/drivers/target/target_core_mod.ko' \
			'*/drivers/target/target_core_iblock.ko' '*/drivers/nvme/target/nvmet.ko' \
			'*/drivers/nvme/target/nvmet-tcp.ko' '*/drivers/nvme/host/nvme-fabrics.ko' '*/drivers/nvme/host/nvme-tcp.ko'
		mkdir -p "$ko"
		for m in "${INUSE_MODULES[@]}" "${INUSE_EXTRA_MODULES[@]}"; do
			f=$(find "$tmp" -name "$m.ko" | head -n 1)
			[ -n "$f" ] || die "$m.ko not in $deb"
			cp "$f" "$ko/"
		done
		rm -rf "$tmp"
	fi
	# The tools disk: modules in load order, lspci with the libraries it loads, the guest helpers.
	local tools=$dir/tools.d lib
	rm -rf "$tools"
	mkdir -p "$tools/modules" "$tools/lib"
	for m in "${INUSE_MODULES[@]}" "${INUSE_EXTRA_MODULES[@]}"; do cp "$ko/$m.ko" "$tools/modules/"; done
	printf '%s\n' "${INUSE_MODULES[@]}" >"$tools/modules/order"
	cp /usr/bin/lspci "$tools/"
	# The pci.ids pcibench is built with (the pci-ids crate's, at Cargo.lock's version; the host's where the
	# crate's source is not here), so the guest's lspci and pcibench name from the same list: info_lspci
	# compares their words, not two releases of pci.ids (Debian 12's names 1af4:1100 "QEMU Virtual Machine"
	# where the crate's newer list says "QEMU").
	local v ids
	v=$(awk '/^name = "pci-ids"$/ { getline; gsub(/[^0-9.]/, ""); print }' "$REPO/Cargo.lock")
	ids=$(compgen -G "${CARGO_HOME:-$HOME/.cargo}/registry/src/*/pci-ids-$v/pciids/pci.ids" | head -n 1 || true)
	cp "${ids:-/usr/share/misc/pci.ids}" "$tools/pci.ids"
	for lib in $(ldd /usr/bin/lspci | awk '/=>/ { print $3 } /ld-linux/ { print $1 }'); do cp -L "$lib" "$tools/lib/"; done
	cp "$LAB/guest/inuse.sh" "$tools/inuse.sh"
	run_logged "$RUN/mke2fs-tools.log" mke2fs -q -F -t ext4 -L tools -d "$tools" "$dir/tools.img" 48M
	rm -rf "$tools"
	# The filesystems under test: ext4 with a known file.
	mkdir -p "$dir/data.d"
	echo "$INUSE_HELLO" >"$dir/data.d/hello.txt"
	run_logged "$RUN/mke2fs-data.log" mke2fs -q -F -t ext4 -L data -d "$dir/data.d" "$dir/data.img" 16M
	run_logged "$RUN/mke2fs-nvme.log" mke2fs -q -F -t ext4 -L nvme -d "$dir/data.d" "$dir/nvme.img" 16M
	rm -rf "$dir/data.d"
	truncate -s 16M "$dir/swap.img"
	# virtio-net's option ROM: 48 KiB of 0xff (no 0x55AA signature, so the firmware never runs it); QEMU
	# rounds the ROM BAR up to 64 KiB (info_lspci compares it with lspci's "Expansion ROM" line).
	head -c 49152 /dev/zero | tr '\0' '\377' >"$dir/option.rom"
	for m in "${INUSE_RAW_DISKS[@]}"; do
		printf '%s %s\n' "$INUSE_RAW" "$m" >"$dir/$m.img"
		truncate -s 1M "$dir/$m.img"
	done
	touch "$dir/.complete"
	exec {lock}>&-
}

ensure_packages_inuse() {
	local missing=() p
	for p in "${INUSE_PACKAGES[@]}"; do
		[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	[ "$(id -u)" = 0 ] || die "missing packages ${missing[*]} and not root: install them first"
	log_step "installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$RUN/apt-install-inuse.log" 2>&1; then
		apt_update
		run_logged "$RUN/apt-install-inuse.log" apt-get install -y --no-install-recommends "${missing[@]}"
	fi
}

# inuse_machine SHM: sets mach and vfio for q35-inuse and adds to append (qemu_args' locals); this boot's disk
# images sit beside its ivshmem backing file (SHM.*), so lab/run's cleanup removes them.
inuse_machine() {
	local shm=$1 img=$RUN/inuse-images i
	inuse_images "$img"
	for i in tools data nvme swap "${INUSE_RAW_DISKS[@]}"; do
		[ -f "$shm.$i" ] || cp --sparse=always "$img/$i.img" "$shm.$i"
	done
	mach=(-machine q35
		-device pcie-root-port,id=rp1,bus=pcie.0,chassis=1,addr=0x10,x-speed=16,x-width=16
		-device pcie-root-port,id=rp2,bus=pcie.0,chassis=2,addr=0x11,x-speed=8,x-width=4
		-device pcie-root-port,id=rp3,bus=pcie.0,chassis=3,addr=0x12,x-speed=2_5,x-width=1
		-device pcie-root-port,id=rp4,bus=pcie.0,chassis=4,addr=0x13
		-device pcie-root-port,id=rp5,bus=pcie.0,chassis=5,addr=0x14,x-speed=8,x-width=8
		-device nvme-subsys,id=subsys0,nqn=pcibench-lab
		-device nvme,id=nvme0,serial=labsubsys,subsys=subsys0,bus=rp1
		-drive "file=$shm.nvme,if=none,id=nvmens,format=raw"
		-device nvme-ns,drive=nvmens,bus=nvme0,nsid=1
		-drive "file=$shm.data,if=none,id=vdata,format=raw"
		-device virtio-blk-pci,drive=vdata,serial=data,bus=rp2
		-drive "file=$shm.swap,if=none,id=vswap,format=raw"
		-device virtio-blk-pci,drive=vswap,serial=swap,bus=rp3
		-netdev hubport,id=n0,hubid=0
		-device "virtio-net-pci,netdev=n0,bus=rp4,romfile=$img/option.rom"
		-drive "file=$shm.raw1,if=none,id=vraw1,format=raw"
		-device virtio-blk-pci,drive=vraw1,serial=raw1,bus=pcie.0,addr=0x5
		-drive "file=$shm.raw2,if=none,id=vraw2,format=raw"
		-device virtio-blk-pci,drive=vraw2,serial=raw2,bus=pcie.0,addr=0x6
		-drive "file=$shm.raw3,if=none,id=vraw3,format=raw"
		-device virtio-blk-pci,drive=vraw3,serial=raw3,bus=pcie.0,addr=0x7
		-device nvme-subsys,id=subsys1,nqn=pcibench-lab-sriov
		-device nvme,serial=sriovpf,subsys=subsys1,bus=pcie.0,addr=0x8,sriov_max_vfs=1,sriov_vq_flexible=2,sriov_vi_flexible=1
		-drive "file=$shm.tools,if=none,id=tools,format=raw"
		-device nvme,serial=tools,drive=tools)
	vfio=noiommu
}
