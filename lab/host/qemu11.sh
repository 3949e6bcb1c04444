# Sourced by lab/run: QEMU 11.1 with QEMU's own vfio-user client (`vfio-user-pci`), for the machines whose guests
# hold served cards (host/served.sh). Debian 12's QEMU (7.2) has no vfio-user client; Debian 13's backports carry
# qemu-system-x86 1:11.1.x built with it. Nothing is installed on the host: apt runs with a sources list and
# package lists of its own under $CACHE/qemu11/apt (trixie and trixie-backports, amd64), resolves
# qemu-system-x86 from trixie-backports with its whole dependency closure against an empty dpkg status (so the
# libraries are trixie's, not a mix with the host's), downloads it (~38 MB) and unpacks it with dpkg-deb -x.
# QEMU then runs through the unpacked loader with --library-path (trixie's glibc and libraries, never the host's),
# its own module folder and its firmware (-L: seabios, option ROMs), from a wrapper script:
#   prepare_qemu11    -> $QEMU11 (the wrapper: takes QEMU's arguments)

Q11_ROOT=$CACHE/qemu11
Q11_APT=$Q11_ROOT/apt
# The suite the package comes from, and the one its dependencies resolve against.
Q11_SUITE=trixie-backports
Q11_PACKAGE=qemu-system-x86

# The host's Debian mirror (the URI its apt uses for bookworm's main archive), so a local mirror serves trixie
# too; deb.debian.org where none is found.
q11_mirror() {
	local uri
	uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Created-By: Packages' 2>/dev/null |
		awk '$2 == "bookworm" { print $1; exit }')
	echo "${uri:-http://deb.debian.org/debian/}"
}

# q11_apt TOOL ARGS...: apt-get / apt-cache with the private trixie sources, lists and an empty dpkg status.
q11_apt() {
	local tool=$1
	shift
	"$tool" -o Dir::Etc::SourceList="$Q11_APT/sources.list" -o Dir::Etc::SourceParts="$Q11_APT/sources.list.d" \
		-o Dir::Etc::Preferences="$Q11_APT/preferences" -o Dir::Etc::PreferencesParts="$Q11_APT/preferences.d" \
		-o Dir::State::Lists="$Q11_APT/lists" -o Dir::State::status="$Q11_APT/status" \
		-o Dir::Cache="$Q11_APT/cache" -o APT::Architecture=amd64 -o APT::Architectures=amd64 \
		-o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false -o Acquire::Languages=none \
		-o APT::Sandbox::User=root -o APT::Install-Recommends=false "$@"
}

q11_update() {
	log_step "apt-get update (trixie package lists for QEMU 11, $Q11_APT)"
	# Debian 12's debian-archive-keyring has carried trixie's keys since 2023.3+deb12u1; an older one is upgraded
	# from the host's own archive.
	if [ ! -f /usr/share/keyrings/debian-archive-trixie-stable.gpg ]; then
		[ "$(id -u)" = 0 ] || die "debian-archive-keyring lacks trixie's keys and not root: upgrade it first"
		apt_update
		run_logged "$RUN/apt-install-keyring.log" apt-get install -y debian-archive-keyring
	fi
	local mirror
	mirror=$(q11_mirror)
	mkdir -p "$Q11_APT/lists/partial" "$Q11_APT/cache/archives/partial" "$Q11_APT/sources.list.d" \
		"$Q11_APT/preferences.d"
	: >"$Q11_APT/status"
	: >"$Q11_APT/preferences"
	printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
		"$mirror" trixie "$mirror" "$Q11_SUITE" >"$Q11_APT/sources.list"
	run_logged "$RUN/apt-update-qemu11.log" q11_apt apt-get update
	Q11_UPDATED=1
}

# The version trixie-backports offers now: Q11_VER.
q11_version() {
	q11_apt apt-cache madison "$Q11_PACKAGE" 2>/dev/null |
		awk -F' *[|] *' -v s="$Q11_SUITE/main" 'index($3, s) { print $2; exit }'
}
Q11_UPDATED=
resolve_qemu11() {
	Q11_VER=
	# Lists older than a week are refreshed (~6 s, 21 MB), so a new backport is picked up.
	if [ -n "$(find "$Q11_APT/lists" -maxdepth 1 -name '*_InRelease' -mtime -7 2>/dev/null)" ]; then
		Q11_VER=$(q11_version) || true
	fi
	if [ -z "$Q11_VER" ]; then
		q11_update
		Q11_VER=$(q11_version) || true
	fi
	[ -n "$Q11_VER" ] || die "$Q11_PACKAGE is not in $Q11_SUITE (see $Q11_APT/sources.list)"
}

# Sets QEMU11 to the wrapper of the unpacked QEMU, fetching and unpacking it on the first run.
prepare_qemu11() {
	local lock
	exec {lock}>"$CACHE/.lock"
	flock "$lock"
	resolve_qemu11
	local qdir=$Q11_ROOT/qemu-${Q11_VER//:/_}
	QEMU11=$qdir/qemu-system-x86_64
	if [ -f "$qdir/.complete" ]; then
		log_step "QEMU $Q11_VER ($Q11_SUITE, vfio-user-pci): cached"
		exec {lock}>&-
		return 0
	fi
	log_step "QEMU $Q11_VER ($Q11_SUITE, vfio-user-pci): fetching and unpacking"
	local t0 d root=$qdir/root
	t0=$(now)
	rm -rf "$qdir"
	mkdir -p "$qdir/download" "$root"
	# The closure against an empty status: every library QEMU loads, from trixie. Recommends are left out (the
	# GUI, SPICE, OpenGL and block modules; the lab runs headless).
	run_logged "$RUN/apt-download-qemu11.log" q11_apt apt-get install -y -qq --download-only \
		-o Dir::Cache::archives="$qdir/download" -t "$Q11_SUITE" "$Q11_PACKAGE=$Q11_VER"
	rm -rf "$qdir/download/partial" "$qdir/download/lock"
	mv "$qdir/download" "$qdir/debs"
	for d in "$qdir"/debs/*.deb; do dpkg-deb -x "$d" "$root"; done
	local ld=$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
	[ -x "$root/usr/bin/qemu-system-x86_64" ] && [ -e "$ld" ] || die "no qemu-system-x86_64 or loader in $root"
	cat >"$QEMU11.tmp" <<EOF
#!/bin/sh
# QEMU $Q11_VER from Debian $Q11_SUITE, unpacked by the pcibench lab (lab/host/qemu11.sh): it runs through its
# own loader and libraries, its own modules (never the host's QEMU's) and its own firmware (-L).
R=$root
QEMU_MODULE_DIR=\$R/usr/lib/x86_64-linux-gnu/qemu LC_ALL=C exec "\$R/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \\
	--library-path "\$R/usr/lib/x86_64-linux-gnu" --argv0 qemu-system-x86_64 "\$R/usr/bin/qemu-system-x86_64" \\
	-L "\$R/usr/share/qemu" -L "\$R/usr/share/seabios" -L "\$R/usr/lib/ipxe/qemu" "\$@"
EOF
	chmod 755 "$QEMU11.tmp"
	mv "$QEMU11.tmp" "$QEMU11"
	"$QEMU11" -machine q35 -device vfio-user-pci,help >"$RUN/qemu11-check.log" 2>&1 ||
		die "the unpacked QEMU does not run: $(tail -n 3 "$RUN/qemu11-check.log")"
	grep -q 'socket=<SocketAddress>' "$RUN/qemu11-check.log" || die "QEMU $Q11_VER has no vfio-user-pci device"
	touch "$qdir/.complete"
	log_step "QEMU $Q11_VER: ready in $(secs "$t0" "$(now)")s ($(du -sm "$qdir/debs" | cut -f1) MB of .debs)"
	for d in "$Q11_ROOT"/qemu-*; do # a newer backport has its own folder: drop the older ones
		[ "$d" = "$qdir" ] || rm -rf "$d"
	done
	exec {lock}>&-
}
