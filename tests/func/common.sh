# common.sh - sourced by the GPU-memory shell tests (hmem_matrix, hmem_text,
# real_answers): what they all need before their first run.

# Nothing of the caller's may steer the plugin, the test provider or the stubs;
# traffic stays on loopback.
fabric_test_clean_env() {
	local v
	for v in $(compgen -e); do
		case $v in
		NCCL_FABRIC_* | TESTHMEM_* | STUBCUDA_* | FI_PROVIDER | FI_PROVIDER_PATH | FI_HMEM*) unset "$v" ;;
		esac
	done
	export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo FI_UDP_IFACE=lo FI_NET_IFACE=lo
}

# fabric_lf_new MAJOR.MINOR: prints yes when that libfabric has
# FI_OPT_CUDA_API_PERMITTED in its core (1.18 on: -FI_EINVAL then means its
# own CUDA support is off), no before; returns 1 when it is no version.
fabric_lf_new() {
	case $1 in
	1.1[0-7] | 1.[0-9]) echo no ;;
	[0-9]*.[0-9]*) echo yes ;;
	*) return 1 ;;
	esac
}
