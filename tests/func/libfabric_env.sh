#!/usr/bin/env bash
# libfabric_env.sh - the tests run on the libfabric they are meant to: the
# plugin (through nccl-fabric-info --json) reports the run-time version, and it
# must be the one this build's variant expects (scripts/test.sh sets it: 1.17
# from Debian 12, or the 2.x built from Debian 13's source). A variant that
# silently fell back to the system library would otherwise pass as "2.x".
#
# On loopback alone it also checks which provider the plugin picks: native tcp
# from libfabric 2.x (listed bare under FI_REMOTE_COMM; discovery asks again
# at 127.0.0.1), tcp;ofi_rxm on 1.x (no native tcp RDM endpoint).
#
# usage: libfabric_env.sh NCCL_FABRIC_INFO FABRIC_JSON_GET EXPECTED_MAJOR.MINOR
set -u
info=$1 jget=$2 want=$3
export FI_TCP_IFACE=lo FI_UDP_IFACE=lo FI_SOCKETS_IFACE=lo FI_NET_IFACE=lo
out=$("$info" --json 2>/dev/null)
rc=$?
# exit 1 (no provider) still reports the versions
if [ $rc -gt 1 ]; then
	echo "FAIL  nccl-fabric-info --json exited $rc"
	exit 1
fi
read -r -d '' runtime build provider < <(printf '%s' "$out" | "$jget" - libfabric_runtime libfabric_build provider)
echo "libfabric at run time: $runtime; plugin built against $build headers; expected at run time: $want"
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
if [ "$runtime" != "$want" ]; then
	echo "FAIL  the tests run on libfabric $runtime, not the $want this build expects"
	exit 1
fi
case $runtime in
1.*) want_prov="tcp;ofi_rxm" ;;
*) want_prov=tcp ;;
esac
echo "provider on loopback: $provider; expected: $want_prov"
if [ "$provider" != "$want_prov" ]; then
	echo "FAIL  on loopback the plugin picked $provider, not $want_prov"
	exit 1
fi
echo "2 passed, 0 failed"
