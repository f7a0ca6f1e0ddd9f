#!/usr/bin/env bash
# runpath.sh - a plugin built against a libfabric outside the system's folders
# (PKG_CONFIG_PATH at configure time, as users of a vendor's libfabric under
# /opt build it) loads that libfabric, not the system's, with no
# LD_LIBRARY_PATH: its RUNPATH names the prefix's lib folder, and the plugin
# reports the libfabric.so.1 it loaded (nccl-fabric-info --json,
# libfabric_path).
#
# usage: runpath.sh NCCL_FABRIC_INFO FABRIC_JSON_GET PLUGIN EXPECTED_VERSION [RUNPATH_DIR...]
# Exit 77 when the build took libfabric from the system (no RUNPATH to check).
set -u
info=$1 jget=$2 plugin=$3 want=$4
shift 4
if [ $# -eq 0 ]; then
	echo "SKIP: this build takes libfabric from the system's library folders: no RUNPATH to check"
	exit 77
fi
dir=$1
export FI_TCP_IFACE=lo FI_UDP_IFACE=lo FI_SOCKETS_IFACE=lo FI_NET_IFACE=lo
fail=0
runpath=$(readelf -d "$plugin" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
echo "RUNPATH of $(basename "$plugin"): ${runpath:-none}"
case ":$runpath:" in
*":$dir:"*) ;;
*) echo "FAIL  the plugin's RUNPATH does not name $dir"; fail=1 ;;
esac
out=$(env -u LD_LIBRARY_PATH "$info" --json 2>/dev/null)
read -r -d '' path runtime < <(printf '%s' "$out" | "$jget" - libfabric_path libfabric_runtime)
echo "with no LD_LIBRARY_PATH: libfabric $runtime from $path"
case $path in
"$dir"/*) ;;
*) echo "FAIL  the plugin loaded $path, not the libfabric under $dir"; fail=1 ;;
esac
if [ "$runtime" != "$want" ]; then
	echo "FAIL  libfabric $runtime at run time, not the $want this build is for"
	fail=1
fi
for sys in /usr/lib/x86_64-linux-gnu/libfabric.so.1 /usr/lib64/libfabric.so.1; do
	[ -e "$sys" ] && echo "beside the system's $(readlink -f "$sys")"
done
[ $fail = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
