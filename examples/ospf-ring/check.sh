#!/bin/sh
# Check the ospf-ring example: wait for OSPF to converge, then ping every router's loopback
# from every other router.
#
# Usage: check.sh [TRELLIS [STATE_DIR]]
#   TRELLIS    the trellis binary (default: trellis, from PATH)
#   STATE_DIR  the state directory the network was brought up with (default: /var/lib/trellis)
#
# TIMEOUT=SECONDS (default 60) bounds the wait for OSPF to converge: a check still running then
# stops before its next command, so that the wait and the message agree (under software emulation a check of four
# routers takes tens of seconds: the integration tests raise TIMEOUT there).
#
# Exit status: 0 if every ping succeeded, 1 if any failed, 2 if the network is not up.

TRELLIS=${1:-trellis}
STATE_DIR=${2:-/var/lib/trellis}
NET=${NET:-ospf-ring}      # NET=ospf-mixed for ../vm-mixed/mixed.yaml
ROUTERS=${ROUTERS:-"1 2 3 4"}  # ROUTERS="1 2 3 4 5" for ring5.yaml
TIMEOUT=${TIMEOUT:-60}

tr_exec() { # tr_exec NODE CMD...
    node=$1
    shift
    "$TRELLIS" --state-dir "$STATE_DIR" exec "$NET" "$node" -- "$@"
}

if ! "$TRELLIS" --state-dir "$STATE_DIR" inspect "$NET" >/dev/null; then
    echo "FAIL: network $NET is not up in $STATE_DIR (run: $TRELLIS --state-dir $STATE_DIR up ring.yaml)" >&2
    exit 2
fi

# converged: every router has OSPF neighbours, all of them in state Full (two in the intact
# ring; one, if a link was cut), and a kernel route to every other router's loopback, and
# every loopback answers a ping (routes can be stale for a dead interval after a link is cut).
# Past the deadline it gives up at once.
in_time() { [ "$(date +%s)" -lt "$deadline" ]; }
converged() {
    for x in $ROUTERS; do
        in_time || return 1
        nbrs=$(tr_exec "r$x" birdc -s /run/bird/bird.ctl show ospf neighbors 2>/dev/null |
            grep -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+[[:space:]]')
        [ -n "$nbrs" ] || return 1
        echo "$nbrs" | grep -qv 'Full' && return 1
        for y in $ROUTERS; do
            [ "$x" = "$y" ] && continue
            in_time || return 1
            [ -n "$(tr_exec "r$x" ip -4 route show "10.255.0.$y/32" 2>/dev/null)" ] || return 1
        done
    done
    for x in $ROUTERS; do
        for y in $ROUTERS; do
            [ "$x" = "$y" ] && continue
            in_time || return 1
            tr_exec "r$x" ping -c1 -W1 -q "10.255.0.$y" >/dev/null 2>&1 || return 1
        done
    done
    return 0
}

echo "waiting up to ${TIMEOUT}s for OSPF to converge..."
start=$(date +%s)
deadline=$((start + TIMEOUT))
until converged; do
    if ! in_time; then
        echo "WARNING: not converged after ${TIMEOUT}s; OSPF neighbours:"
        for x in $ROUTERS; do
            echo "--- r$x"
            tr_exec "r$x" birdc -s /run/bird/bird.ctl show ospf neighbors
        done
        start=
        break
    fi
    sleep 1
done
[ -n "$start" ] && echo "converged after $(($(date +%s) - start))s"

failed=0
total=0
for x in $ROUTERS; do
    for y in $ROUTERS; do
        [ "$x" = "$y" ] && continue
        if tr_exec "r$x" ping -c1 -W1 -q "10.255.0.$y" >/dev/null 2>&1; then
            echo "ok    r$x -> r$y (10.255.0.$y)"
        else
            echo "FAIL  r$x -> r$y (10.255.0.$y)"
            failed=$((failed + 1))
        fi
        total=$((total + 1))
    done
done

if [ "$failed" -ne 0 ]; then
    echo "$failed of $total pings failed"
    exit 1
fi
echo "all $total pings succeeded"
