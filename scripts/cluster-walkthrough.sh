#!/usr/bin/env bash
# The walkthrough of docs/cluster.md, as a script: a cluster of three simulated machines
# (network namespaces on one host), each running an etcd member of a 3-member etcd with TLS and
# `trellis agent --placer`; a tenant brings a 3-node chain up across the machines, pings along
# it, pulls a link's cable and gives it back, loses a machine and finds its node placed again.
# Everything it made is removed at the end, whatever happens.
#
#   scripts/cluster-walkthrough.sh
#
# Run as root from the repository, after scripts/setup.sh (it builds etcd) and with trellis on
# PATH (or TRELLIS=/path/to/trellis); LOGS=DIR keeps the etcd members' and agents' logs
# there. It refuses to run when simulated machines exist already.
# test/integration/walkthrough_test.go runs it in CI, so the page says what works.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts=$PWD/scripts
TRELLIS=${TRELLIS:-$(command -v trellis || true)}
[ -x "$TRELLIS" ] || { echo "walkthrough: no trellis binary: go build -o /usr/local/bin/trellis ./cmd/trellis, or set TRELLIS" >&2; exit 2; }
ETCD=${TRELLIS_ETCD:-$(ls /var/cache/trellis/etcd-v3.*/etcd 2>/dev/null | tail -1)}
[ -x "$ETCD" ] || { echo "walkthrough: no etcd: run scripts/setup.sh (it builds one), or set TRELLIS_ETCD" >&2; exit 2; }
if ip netns list | grep -q '^trellis-sim-'; then
	echo "walkthrough: simulated machines exist already (ip netns list); remove them with scripts/sim-machines.sh down" >&2
	exit 2
fi
dir=$(mktemp -d /tmp/trellis-walkthrough.XXXXXX)
on() { local m=$1; shift; ip netns exec "trellis-sim-$m" "$@"; } # run a command "on" machine m
# (daemons are started with ip netns exec itself, which execs them: $! is their pid)
step() { echo "walkthrough: $*"; }

cleanup() {
	set +e
	for i in 1 2 3; do [ -f "$dir/agent-m$i.pid" ] && kill "$(cat "$dir/agent-m$i.pid")" 2>/dev/null; done
	for i in 1 2 3; do [ -f "$dir/agent-m$i.pid" ] && tail --pid="$(cat "$dir/agent-m$i.pid")" -f /dev/null; done
	for i in 1 2 3; do
		ip netns list | grep -q "^trellis-sim-m$i" && on m$i "$TRELLIS" --state-dir "$dir/state-m$i" down --all >/dev/null 2>&1
	done
	for i in 1 2 3; do [ -f "$dir/etcd-e$i.pid" ] && kill "$(cat "$dir/etcd-e$i.pid")" 2>/dev/null; done
	for i in 1 2 3; do [ -f "$dir/etcd-e$i.pid" ] && tail --pid="$(cat "$dir/etcd-e$i.pid")" -f /dev/null; done
	"$scripts/sim-machines.sh" down
	[ -n "${LOGS:-}" ] && mkdir -p "$LOGS" && cp "$dir"/*.log "$LOGS"/
	rm -rf "$dir"
}
trap cleanup EXIT

step "three machines m1..m3, underlay 198.18.0.1..3 on one bridge"
"$scripts/sim-machines.sh" up 3 >/dev/null
cd "$dir"

step "certificates: the cluster's CA, the etcd peers' CA, one client and one peer certificate per member (its own address), the administrator's"
"$TRELLIS" cert ca --out . >/dev/null
"$TRELLIS" cert ca --peer --out . >/dev/null
for i in 1 2 3; do
	"$TRELLIS" cert issue e$i --ca ca.crt --ca-key ca.key --hosts 198.18.0.$i >/dev/null
	"$TRELLIS" cert issue e$i --peer --ca peer-ca.crt --ca-key peer-ca.key --hosts 198.18.0.$i >/dev/null
done
"$TRELLIS" cert issue root --ca ca.crt --ca-key ca.key >/dev/null

step "etcd: one member on each machine, each on its own address (a member's peer certificate must name the address it connects from)"
members=e1=https://198.18.0.1:2380,e2=https://198.18.0.2:2380,e3=https://198.18.0.3:2380
for i in 1 2 3; do
	ip netns exec trellis-sim-m$i "$ETCD" --name e$i --data-dir "$dir/etcd-e$i" \
		--listen-client-urls https://198.18.0.$i:2379 --advertise-client-urls https://198.18.0.$i:2379 \
		--listen-peer-urls https://198.18.0.$i:2380 --initial-advertise-peer-urls https://198.18.0.$i:2380 \
		--initial-cluster $members --initial-cluster-state new \
		--cert-file e$i.crt --key-file e$i.key --trusted-ca-file ca.crt --client-cert-auth --enable-grpc-gateway=false \
		--peer-cert-file e$i-peer.crt --peer-key-file e$i-peer.key --peer-trusted-ca-file peer-ca.crt --peer-client-cert-auth \
		>etcd-e$i.log 2>&1 &
	echo $! >etcd-e$i.pid
done
endpoints=https://198.18.0.1:2379,https://198.18.0.2:2379,https://198.18.0.3:2379
printf 'etcd: [%s]\ncacert: ca.crt\ncert: root.crt\nkey: root.key\n' "$endpoints" >admin.yaml

step "machines: an identity each (machine add), then an agent with a placer on each"
for i in 1 2 3; do
	# The first call waits for etcd's quorum (the members find each other within seconds).
	for try in $(seq 30); do
		on m1 "$TRELLIS" --cluster admin.yaml machine add m$i --placer --ca-key ca.key --hosts 198.18.0.$i >/dev/null 2>machine-add.err && break
		[ "$try" = 30 ] && { cat machine-add.err etcd-e1.log >&2; exit 1; }
		sleep 1
	done
	ip netns exec trellis-sim-m$i "$TRELLIS" --state-dir "$dir/state-m$i" agent --placer --lease 3s \
		--etcd $endpoints --machine m$i \
		--cacert ca.crt --cert agent-m$i.crt --key agent-m$i.key >agent-m$i.log 2>&1 &
	echo $! >agent-m$i.pid
done
on m1 "$TRELLIS" --cluster admin.yaml tenant add alice --ca-key ca.key --out alice --nodes 20 >/dev/null

step "alice brings up a chain a - b - c across the machines"
cat >chain.yaml <<'YAML'
name: chain
nodes:
  a: {addresses: {eth1: [10.0.1.1/24]}, exec: ["ip route add 10.0.2.0/24 via 10.0.1.2"]}
  b: {addresses: {eth1: [10.0.1.2/24], eth2: [10.0.2.1/24]}}
  c: {addresses: {eth1: [10.0.2.2/24]}, exec: ["ip route add 10.0.1.0/24 via 10.0.2.1"]}
links:
  - {name: ab, endpoints: [a:eth1, b:eth1]}
  - {name: bc, endpoints: [b:eth2, c:eth1]}
YAML
A() { on m1 "$TRELLIS" --cluster alice/alice.yaml "$@"; }
for try in $(seq 40); do # the agents register within a second or two
	[ "$(on m1 "$TRELLIS" --cluster admin.yaml machine ls | grep -c '^m[0-9]')" = 3 ] && break
	[ "$try" = 40 ] && { cat agent-m*.log >&2; exit 1; }
	sleep 0.5
done
on m1 "$TRELLIS" --cluster admin.yaml machine ls
A up chain.yaml
A ls
A exec chain a -- ping -c3 -W2 10.0.2.2 >/dev/null

step "a pulled cable: link bc down stops the ping, link bc up gives it back"
A link chain bc down
if A exec chain a -- ping -c2 -W1 10.0.2.2 >/dev/null 2>&1; then
	echo "walkthrough: a reached c with link bc down" >&2
	exit 1
fi
A link chain bc up
A exec chain a -- ping -c3 -W2 10.0.2.2 >/dev/null

step "a lost machine: the agent holding c (or b, when c is on m1, where the CLI runs) killed and its cable pulled; the node runs elsewhere within the lease"
where() { A inspect chain --json | tr -d ' \n' | sed -n "s/.*\"$1\":\"\(m[0-9]\)\".*/\1/p"; }
before="a:$(where a) b:$(where b) c:$(where c)"
lost=c target=10.0.2.2
[ "$(where c)" != m1 ] || lost=b target=10.0.1.2
M=$(where $lost)
kill -9 "$(cat agent-$M.pid)"
rm agent-$M.pid
ip -n trellis-sim-$M link set eth0 down
for try in $(seq 40); do
	A exec chain a -- ping -c1 -W1 $target >/dev/null 2>&1 && break
	[ "$try" = 40 ] && { A inspect chain >&2; exit 1; }
	sleep 0.5
done
A inspect chain | sed -n 1,7p
# The nodes of the other machines stay: their agents renew their leases through the members left.
after="a:$(where a) b:$(where b) c:$(where c)"
for n in a b c; do
	[ $n = $lost ] || [ "$(echo "$before" | grep -o "$n:m[0-9]")" = "$(echo "$after" | grep -o "$n:m[0-9]")" ] ||
		{ echo "walkthrough: node $n moved too ($before -> $after): its machine's agent lost its lease" >&2; exit 1; }
done
A down chain
step "done: everything the walkthrough made is removed now"
