#!/usr/bin/env bash
# netns.sh - an emulated cluster on one machine: N "hosts", each a network
# namespace fabh<i> with a real interface eth0 (10.77.0.<i+1>/24), joined by
# veth pairs to a bridge fabbr0 in the root namespace, optionally shaped to a
# line rate with tbf. Sourced by bench/run-gpu.sh (FABRIC_NETNS=1); also runs
# alone (as root):
#
#   bench/netns.sh up N        make hosts fabh0..fabh<N-1> (removing old ones)
#   bench/netns.sh down        remove every fabh* namespace, fabv* veth, fabbr0
#   bench/netns.sh exec I CMD  run CMD in host I
#   bench/netns.sh show        addresses and qdiscs of each host
#   bench/netns.sh tcp-rate A B [SECONDS]
#                              one TCP stream from host A to host B (python3)
#
# Settings:
#   FABRIC_IPROUTE2      prefix of an unpacked iproute2 (scripts/fetch-iproute2.sh;
#                        default .device/iproute2 when it exists, else the
#                        system's ip); its lib folders go on LD_LIBRARY_PATH of
#                        ip and tc only, never of the commands run in a host
#   FABRIC_NETNS_RATE    tbf rate, e.g. 25gbit (empty: unshaped). Both ends of
#                        each veth are shaped: a host's sends and its receives
#   FABRIC_NETNS_BURST   tbf burst (default 8mb); FABRIC_NETNS_LATENCY (20ms)
#   FABRIC_NETNS_MTU     MTU of the veths and the bridge (default 1500)

NETNS_PREFIX=fabh
NETNS_BRIDGE=fabbr0
NETNS_SUBNET=10.77.0
# shellcheck disable=SC2034 # read by run-gpu.sh
NETNS_N=0

# ip and tc, from FABRIC_IPROUTE2 when set
netns_tools() {
	local repo pfx=${FABRIC_IPROUTE2:-}
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	[[ -z $pfx && -x $repo/.device/iproute2/bin/ip ]] && pfx=$repo/.device/iproute2
	if [[ -n $pfx ]]; then
		pfx=$(cd "$pfx" 2>/dev/null && pwd) || { echo "netns: FABRIC_IPROUTE2=$pfx does not exist" >&2; return 1; }
		NETNS_IP=$pfx/bin/ip NETNS_TC=$pfx/bin/tc
		NETNS_LIBS=$pfx/lib:$pfx/lib/x86_64-linux-gnu:$pfx/usr/lib/x86_64-linux-gnu
	else
		NETNS_IP=$(command -v ip) NETNS_TC=$(command -v tc) NETNS_LIBS=
	fi
	[[ -x $NETNS_IP && -x $NETNS_TC ]] ||
		{ echo "netns: no ip/tc (run scripts/fetch-iproute2.sh and copy .device/ along, or set FABRIC_IPROUTE2)" >&2; return 1; }
	nip -V >/dev/null 2>&1 || { echo "netns: $NETNS_IP does not run: $(nip -V 2>&1 | head -n 2)" >&2; return 1; }
}
nip() { LD_LIBRARY_PATH=$NETNS_LIBS "$NETNS_IP" "$@"; }
ntc() { LD_LIBRARY_PATH=$NETNS_LIBS "$NETNS_TC" "$@"; }

# NETNS_EXEC: words to put in front of a command to run it in host $1; the
# command gets the caller's LD_LIBRARY_PATH, not the iproute2 prefix's.
netns_exec_words() {
	NETNS_EXEC=(env "LD_LIBRARY_PATH=$NETNS_LIBS" "$NETNS_IP" netns exec "$NETNS_PREFIX$1" env)
	if [[ -n ${LD_LIBRARY_PATH+x} ]]; then
		NETNS_EXEC+=("LD_LIBRARY_PATH=$LD_LIBRARY_PATH")
	else
		NETNS_EXEC+=(-u LD_LIBRARY_PATH)
	fi
}

netns_down() {
	[[ -n ${NETNS_IP:-} ]] || netns_tools || return 1
	local ns v
	for ns in $(nip netns list 2>/dev/null | awk '{print $1}' | grep "^${NETNS_PREFIX}[0-9]*\$"); do
		nip netns del "$ns" 2>/dev/null # its eth0 goes with it, and so its veth peer
	done
	for v in $(nip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^fabv[0-9]*$'); do
		nip link del "$v" 2>/dev/null
	done
	nip link show "$NETNS_BRIDGE" >/dev/null 2>&1 && nip link del "$NETNS_BRIDGE"
	NETNS_N=0
	return 0
}

# tbf on device $1 (nip/ntc prefix words in $2..: e.g. "-n fabh0")
netns_shape() {
	local dev=$1
	shift
	[[ -n ${FABRIC_NETNS_RATE:-} ]] || return 0
	ntc "$@" qdisc replace dev "$dev" root tbf rate "$FABRIC_NETNS_RATE" \
		burst "${FABRIC_NETNS_BURST:-8mb}" latency "${FABRIC_NETNS_LATENCY:-20ms}"
}

netns_up() {
	local n=$1 i ns mtu=${FABRIC_NETNS_MTU:-1500}
	((n >= 1 && n <= 250)) || { echo "netns: host count $n not in 1..250" >&2; return 1; }
	netns_tools || return 1
	netns_down
	nip link add "$NETNS_BRIDGE" type bridge stp_state 0 forward_delay 0 &&
		nip link set "$NETNS_BRIDGE" mtu "$mtu" up || return 1
	for ((i = 0; i < n; i++)); do
		ns=$NETNS_PREFIX$i
		if ! { nip netns add "$ns" &&
			nip link add "fabv$i" mtu "$mtu" type veth peer name eth0 mtu "$mtu" netns "$ns" &&
			nip link set "fabv$i" master "$NETNS_BRIDGE" up &&
			nip -n "$ns" addr add "$NETNS_SUBNET.$((i + 1))/24" dev eth0 &&
			nip -n "$ns" link set lo up &&
			nip -n "$ns" link set eth0 up &&
			netns_shape eth0 -n "$ns" && netns_shape "fabv$i"; }; then
			echo "netns: making host $ns failed" >&2
			netns_down
			return 1
		fi
	done
	# shellcheck disable=SC2034 # read by run-gpu.sh
	NETNS_N=$n
	# bridged frames go through iptables when br_netfilter says so: a FORWARD
	# policy of DROP (Docker's) would then drop them
	if [[ $(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null) == 1 ]]; then
		echo "netns: note: net.bridge.bridge-nf-call-iptables=1: iptables' FORWARD chain sees the bridge's traffic" >&2
	fi
	netns_wait "$n"
}

# Every host reaches host 0 (a TCP connect to a closed port answers at once
# with a reset when the path works); bash's /dev/tcp, no ping needed.
netns_wait() {
	local n=$1 i t out
	netns_exec_words 0
	for ((i = 1; i < n; i++)); do
		netns_exec_words "$i"
		for ((t = 0; t < 50; t++)); do
			out=$("${NETNS_EXEC[@]}" timeout 2 bash -c "exec 3<>/dev/tcp/$NETNS_SUBNET.1/9" 2>&1)
			[[ $out == *[Rr]efused* ]] && break
			sleep 0.1
		done
		((t < 50)) || { echo "netns: host $i cannot reach $NETNS_SUBNET.1" >&2; return 1; }
	done
	return 0
}

# One line per host: address, MTU, qdisc.
netns_show() {
	local i ns
	netns_tools || return 1
	for ns in $(nip netns list 2>/dev/null | awk '{print $1}' | grep "^${NETNS_PREFIX}[0-9]*\$" | sort -V); do
		i=${ns#"$NETNS_PREFIX"}
		printf '%s: %s mtu %s; eth0 %s; fabv%s %s\n' "$ns" \
			"$(nip -n "$ns" -o -4 addr show dev eth0 | awk '{print $4}')" \
			"$(nip -n "$ns" -o link show dev eth0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')" \
			"$(ntc -n "$ns" qdisc show dev eth0 | head -n 1 | cut -d' ' -f2,7-12)" "$i" \
			"$(ntc qdisc show dev "fabv$i" | head -n 1 | cut -d' ' -f2,7-12)"
	done
}

# One TCP stream from host $1 to host $2 for $3 seconds (default 3): prints
# "tcp A->B: X Gbit/s". Needs python3.
netns_tcp_rate() {
	local a=$1 b=$2 secs=${3:-3} port=$((20000 + RANDOM % 20000)) out
	command -v python3 >/dev/null || { echo "netns: no python3 for tcp-rate" >&2; return 1; }
	local py='
import socket, sys, time
role, host, port, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
if role == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(30); c, _ = s.accept()
    buf = bytearray(4 << 20); n = 0; t0 = None
    while True:
        k = c.recv_into(buf)
        if not k: break
        if t0 is None: t0 = time.monotonic()
        n += k
    dt = time.monotonic() - t0
    print("%.2f Gbit/s (%d MiB in %.2f s)" % (n * 8 / dt / 1e9, n >> 20, dt))
else:
    for _ in range(100):
        try: c = socket.create_connection((host, port)); break
        except OSError: time.sleep(0.05)
    buf = memoryview(bytearray(4 << 20)); end = time.monotonic() + secs
    while time.monotonic() < end: c.sendall(buf)
    c.close()
'
	netns_exec_words "$b"
	"${NETNS_EXEC[@]}" python3 -c "$py" recv "$NETNS_SUBNET.$((b + 1))" "$port" "$secs" >"${TMPDIR:-/tmp}/netns-rate.$$" 2>&1 &
	local rpid=$!
	netns_exec_words "$a"
	"${NETNS_EXEC[@]}" python3 -c "$py" send "$NETNS_SUBNET.$((b + 1))" "$port" "$secs" || true
	wait "$rpid"
	out=$(cat "${TMPDIR:-/tmp}/netns-rate.$$")
	rm -f "${TMPDIR:-/tmp}/netns-rate.$$"
	echo "tcp $NETNS_PREFIX$a->$NETNS_PREFIX$b: $out"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -u -o pipefail
	case ${1:-} in
	up) netns_up "${2:?host count}" && netns_show ;;
	down) netns_down ;;
	show) netns_show ;;
	exec)
		netns_tools || exit 2
		netns_exec_words "${2:?host index}"
		shift 2
		exec "${NETNS_EXEC[@]}" "$@"
		;;
	tcp-rate) netns_tools && netns_tcp_rate "${2:?host A}" "${3:?host B}" "${4:-3}" ;;
	*)
		sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
		exit 2
		;;
	esac
fi
