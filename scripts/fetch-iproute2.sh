#!/usr/bin/env bash
# Fetches Debian's iproute2 (ip, tc) with the libraries it loads, as .debs,
# unpacks them with dpkg -x and keeps ip, tc and the libraries they load in a
# prefix (bin/, lib/; plain files) that runs without installing anything: for
# a GPU host whose kernel has network namespaces, veth, bridge and tbf but
# that has no ip or tc (bench/run-gpu.sh, FABRIC_NETNS=1).
#
#   scripts/fetch-iproute2.sh [DEBS_DIR [PREFIX]]
#
# DEBS_DIR default .device/iproute2-debs, PREFIX default .device/iproute2 (both
# ignored by git). Needs a Debian machine that reaches Debian's archive
# (apt-get download); the .debs already in DEBS_DIR are kept. Idempotent:
# packages present are not fetched again, and the prefix is unpacked afresh.
# Checks that ip and tc run with only the prefix's libraries
# (LD_LIBRARY_PATH=PREFIX/lib) and prints the prefix on stdout
# (FABRIC_IPROUTE2). Debian 12's binaries need glibc 2.34 or newer where they
# run. Exit 0 ok, 1 failure.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
debs=${1:-$repo/.device/iproute2-debs}
prefix=${2:-$repo/.device/iproute2}
pkgs=(iproute2 libbpf1 libelf1 libmnl0 libcap2 libxtables12 libtirpc3 libbsd0 libdb5.3 libmd0
	libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2
	zlib1g) # libelf1 needs libz: most hosts have it, this one need not

say() { echo "fetch-iproute2: $*" >&2; }

mkdir -p "$debs"
debs=$(cd "$debs" && pwd)
missing=()
for p in "${pkgs[@]}"; do
	compgen -G "$debs/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
	say "downloading ${missing[*]}"
	(cd "$debs" && apt-get -o APT::Sandbox::User=root download "${missing[@]}") >&2 ||
		{ say "apt-get download failed (apt-get update first?)"; exit 1; }
fi

case $prefix in /) say "refusing to unpack into /"; exit 1 ;; esac
rm -rf "$prefix"
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
stage=$prefix/.unpacked
for d in "$debs"/*.deb; do
	dpkg -x "$d" "$stage"
done

# The prefix keeps only ip, tc and the libraries they load, as plain files (no
# symbolic links, which not every way of carrying a folder keeps): bin/, lib/.
mkdir -p "$prefix/bin" "$prefix/lib"
slibs=$stage/lib/x86_64-linux-gnu:$stage/usr/lib/x86_64-linux-gnu
for t in ip tc; do
	f=$(cd "$stage" && find bin sbin usr/bin usr/sbin -maxdepth 1 -name "$t" \( -type f -o -type l \) 2>/dev/null | head -n 1)
	[[ -n $f ]] || { say "no $t in the unpacked packages"; exit 1; }
	cp -L "$stage/$f" "$prefix/bin/$t"
	LD_LIBRARY_PATH=$slibs ldd "$prefix/bin/$t" | awk -v s="$stage" '$2 == "=>" && index($3, s) == 1 {print $1, $3}' |
		while read -r name file; do cp -L "$file" "$prefix/lib/$name"; done
done
rm -rf "$stage"

libs=$prefix/lib
for t in ip tc; do
	if ! out=$(LD_LIBRARY_PATH=$libs "$prefix/bin/$t" -V 2>&1); then
		say "$prefix/bin/$t -V failed: $out"
		exit 1
	fi
	say "$t: $out"
done
# every library ip and tc load must come from the prefix or the C library's own set
for t in ip tc; do
	LD_LIBRARY_PATH=$libs ldd "$prefix/bin/$t" | awk -v p="$prefix" '
		/=>/ && index($3, p) != 1 && $1 !~ /^(libc|libm|libdl|libpthread|libresolv|librt)\.so/ {print "  from the system: " $0; bad = 1}
		/not found/ {print "  missing: " $0; bad = 1}
		END {exit bad}' >&2 || { say "$t needs libraries the prefix lacks (above)"; exit 1; }
done
say "$(du -sh "$prefix" | cut -f1) in $prefix: $(cd "$prefix" && echo bin/* lib/*)"
echo "$prefix"
