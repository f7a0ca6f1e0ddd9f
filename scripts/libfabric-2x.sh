#!/usr/bin/env bash
# Builds libfabric 2.x from Debian 13 (trixie)'s own source package into a
# cache that later runs reuse, and prints the install prefix on stdout.
#
#   scripts/libfabric-2x.sh            tcp, rxm, shm, sm2, udp, rxd
#   scripts/libfabric-2x.sh --cuda     the same with libfabric's CUDA support,
#                                      loaded at run time (--enable-cuda-dlopen):
#                                      CUDA headers from the machine's toolkit
#                                      (CUDA_HOME, default /usr/local/cuda), nvml.h
#                                      from Debian 12 non-free's libnvidia-ml-dev
#
# Nothing comes from outside Debian's archive: the orig tarball arrives through
# apt (a private configuration naming trixie's deb-src; nothing is added to the
# system's sources) and its sha256 is checked against trixie's Sources index.
# libnvidia-ml-dev is unpacked into the cache, not installed.
#
# Cache: $NCCL_FABRIC_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/nccl-fabric
# (outside the work tree: CI runs in a fresh clone each time). A prefix is
# rebuilt only when the version or the configure line changes.
#
# Exit status: 0 and the prefix on stdout; 77 when a part cannot be had here
# (no network to Debian's archive and nothing cached, no CUDA headers), with
# the reason on stderr; 1 when the build itself fails (log path on stderr).
set -euo pipefail

cuda=0
for a in "$@"; do
  case $a in
    --cuda) cuda=1 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--cuda]" >&2; exit 2 ;;
  esac
done

cache=${NCCL_FABRIC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nccl-fabric}
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # two builds into one cache wait for each other

skip() { echo "SKIP: $*" >&2; exit 77; }
say() { echo "libfabric-2x: $*" >&2; }

# --- the source, through apt with a private configuration -------------------
apt_dir=$cache/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
cat >"$apt_dir/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian trixie main
deb http://deb.debian.org/debian bookworm non-free
EOF
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives"
          -o Debug::NoLocking=1 -o APT::Sandbox::User=root -qq)

sources_index() { ls "$apt_dir"/lists/*trixie_main_source_Sources* 2>/dev/null | head -1 || true; }
# Refresh the index at most once a day; work from the cached one when offline.
if [ -z "$(sources_index)" ] || [ -n "$(find "$apt_dir/lists" -maxdepth 1 -name '*Sources*' -mtime +0)" ]; then
  apt-get "${apt_opts[@]}" update >"$apt_dir/update.log" 2>&1 || say "apt-get update failed (see $apt_dir/update.log); using the cached index"
fi
index=$(sources_index)
[ -n "$index" ] || skip "cannot reach Debian's archive for trixie's source index, and no index is cached"

# Version and sha256 of the orig tarball, from the Sources stanza of libfabric.
read -r version orig sha < <(awk '
  /^Package: / { inpkg = ($2 == "libfabric") }
  inpkg && /^Version: / { v = $2 }
  inpkg && /^Checksums-Sha256:/ { sums = 1; next }
  inpkg && sums && /^ / { if ($3 ~ /\.orig\.tar\./) { f = $3; s = $1 } ; next }
  { sums = 0 }
  inpkg && /^$/ && f { print v, f, s; exit }
  END { if (inpkg && f) print v, f, s }' <(/usr/lib/apt/apt-helper cat-file "$index") | head -1)
[ -n "${orig:-}" ] || skip "trixie's Sources index names no libfabric orig tarball"
upstream=${version%%-*}
upstream=${upstream#*:}

src_dir=$cache/src
mkdir -p "$src_dir"
if [ ! -f "$src_dir/$orig" ] || ! echo "$sha  $src_dir/$orig" | sha256sum -c --status; then
  say "fetching $orig (libfabric $version, Debian 13)"
  # The .dsc and debian.tar may be missing from the mirror; only the orig
  # tarball is needed, and it is checked below.
  (cd "$src_dir" && apt-get "${apt_opts[@]}" source --download-only "libfabric=$version") \
    >"$src_dir/source.log" 2>&1 || true
  [ -f "$src_dir/$orig" ] || skip "cannot download $orig from Debian's archive (see $src_dir/source.log)"
fi
echo "$sha  $src_dir/$orig" | sha256sum -c --status ||
  { echo "libfabric-2x: $orig does not match trixie's Sources index (sha256 $sha)" >&2; exit 1; }

# --- configure line ------------------------------------------------------------
providers=(--enable-only --enable-tcp --enable-rxm --enable-shm --enable-sm2 --enable-udp
           --enable-rxd)
conf=(--disable-static --disable-silent-rules --disable-dependency-tracking "${providers[@]}")
variant=nocuda
cppflags=""
if [ $cuda = 1 ]; then
  variant=cuda
  cuda_home=${CUDA_HOME:-/usr/local/cuda}
  [ -f "$cuda_home/include/cuda_runtime.h" ] && [ -f "$cuda_home/include/cuda.h" ] ||
    skip "no CUDA toolkit headers at $cuda_home/include (set CUDA_HOME)"
  nvml_dir=$cache/nvml
  if [ ! -f "$nvml_dir/usr/include/nvml.h" ]; then
    (cd "$apt_dir/archives" && apt-get "${apt_opts[@]}" download libnvidia-ml-dev) \
      >"$apt_dir/nvml.log" 2>&1 || true
    deb=$(ls "$apt_dir"/archives/libnvidia-ml-dev_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || skip "cannot download libnvidia-ml-dev (nvml.h) from Debian 12 non-free (see $apt_dir/nvml.log)"
    rm -rf "$nvml_dir" && dpkg-deb -x "$deb" "$nvml_dir"
  fi
  [ -f "$nvml_dir/usr/include/nvml.h" ] || skip "libnvidia-ml-dev has no nvml.h"
  cppflags="-I$nvml_dir/usr/include"
  conf+=(--with-cuda="$cuda_home" --enable-cuda-dlopen --without-gdrcopy)
fi

prefix=$cache/libfabric-$upstream-$variant
stamp="$orig $sha ${conf[*]} CPPFLAGS=$cppflags"
if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$stamp" ] &&
   [ -e "$prefix/lib/libfabric.so.1" ]; then
  echo "$prefix"
  exit 0
fi

# --- build -------------------------------------------------------------------------
for tool in autoconf automake libtoolize make cc; do
  command -v $tool >/dev/null || skip "$tool is missing (scripts/install-deps.sh installs it)"
done
# The orig tarball has no configure script: autogen.sh runs once per tarball,
# into a source tree both flavours build from (out of tree).
tree=$cache/tree/libfabric-$upstream
if [ ! -f "$cache/tree/.stamp" ] || [ "$(cat "$cache/tree/.stamp")" != "$orig $sha" ] ||
   [ ! -x "$tree/configure" ]; then
  rm -rf "$cache/tree" && mkdir -p "$cache/tree"
  say "unpacking $orig and running autogen.sh"
  if ! (tar -xf "$src_dir/$orig" -C "$cache/tree" && cd "$tree" && ./autogen.sh) \
       >"$cache/tree/autogen.log" 2>&1; then
    echo "libfabric-2x: autogen.sh failed; last lines of $cache/tree/autogen.log:" >&2
    tail -20 "$cache/tree/autogen.log" >&2
    exit 1
  fi
  echo "$orig $sha" >"$cache/tree/.stamp"
fi
work=$cache/build-$variant
rm -rf "$work" "$prefix"
mkdir -p "$work"
log=$work/build.log
say "building libfabric $upstream ($variant) into $prefix; log $log"
start=$(date +%s)
if ! (
  set -e
  cd "$work"
  CPPFLAGS="$cppflags" "$tree/configure" --prefix="$prefix" "${conf[@]}"
  make -j"$(nproc)"
  make install
) >"$log" 2>&1; then
  echo "libfabric-2x: build failed; last lines of $log:" >&2
  tail -20 "$log" >&2
  exit 1
fi
if [ $cuda = 1 ] && ! grep -q '#define HAVE_CUDA 1' "$work/config.h"; then
  echo "libfabric-2x: configure did not enable CUDA support (see $log)" >&2
  exit 1
fi
echo "$stamp" >"$prefix/.stamp"
find "$work" -mindepth 1 -maxdepth 1 ! -name build.log -exec rm -rf {} + # keep the log
say "built in $(( $(date +%s) - start )) s"
echo "$prefix"
