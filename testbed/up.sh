#!/usr/bin/env bash
# Boots BOXES fresh testbed boxes in parallel and writes the Vagrant-style contract:
#   state/ssh-config     Host box1..N (127.0.0.1, forwarded port, vagrant, testbed key,
#                        strict host key checking against state/known_hosts)
#   state/known_hosts    each box's host key, generated here and injected at boot
#   state/inventory.yml  group postgres, each host via ssh_config_file: ssh-config
# Env: BOXES (2), MEM MiB per box (2048), SMP vCPUs (1), BOOT_TIMEOUT s (900).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BOXES=${BOXES:-2}
MEM=${MEM:-2048}
SMP=${SMP:-1}
BOOT_TIMEOUT=${BOOT_TIMEOUT:-900}
[[ $BOXES =~ ^[1-9][0-9]*$ ]] || die "BOXES must be a positive number, got '$BOXES'"
command -v qemu-system-x86_64 >/dev/null || die "missing qemu-system-x86_64: apt-get install qemu-system-x86 qemu-utils"

img=$("$TESTBED_DIR/build-image.sh")
mkdir -p "$STATE_DIR"
"$TESTBED_DIR/down.sh" --quiet || true

key=$STATE_DIR/id_ed25519
[[ -f $key ]] || ssh-keygen -q -t ed25519 -N '' -C pgtune-testbed -f "$key"
accel=$(accel_args)
log "accelerator: $accel"

port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }
next_port=$(box_port 1)
: >"$STATE_DIR/known_hosts"
: >"$STATE_DIR/ssh-config.tmp"
inv="all:
  children:
    postgres:
      hosts:"
for i in $(seq 1 "$BOXES"); do
	name=box$i
	bd=$STATE_DIR/$name
	rm -rf "$bd"
	mkdir -p "$bd/seed"
	while ! port_free "$next_port"; do next_port=$((next_port + 1)); done
	port=$next_port
	next_port=$((next_port + 1))
	echo "$port" >"$bd/port"

	ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$bd/seed/ssh_host_ed25519_key"
	echo "$name" >"$bd/seed/hostname"
	cp "$key.pub" "$bd/seed/authorized_keys"
	mkfs.ext4 -q -F -L TBSEED -d "$bd/seed" "$bd/seed.img" 8M
	qemu-img create -q -f qcow2 -F raw -b "$img/rootfs.img" "$bd/overlay.qcow2"

	echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$bd/seed/ssh_host_ed25519_key.pub")" >>"$STATE_DIR/known_hosts"
	cat >>"$STATE_DIR/ssh-config.tmp" <<CFG
Host $name
  HostName 127.0.0.1
  Port $port
  User vagrant
  IdentityFile $key
  IdentitiesOnly yes
  UserKnownHostsFile $STATE_DIR/known_hosts
  StrictHostKeyChecking yes
  PasswordAuthentication no
  ConnectTimeout 60
  LogLevel ERROR

CFG
	inv+="
        $name:
          ssh_config_file: ssh-config
          become: true"
done
mv "$STATE_DIR/ssh-config.tmp" "$STATE_DIR/ssh-config"
printf '%s\n' "# Written by testbed/up.sh; boxes reached through ssh-config beside this file." "$inv" >"$STATE_DIR/inventory.yml"

t0=$(date +%s)
for i in $(seq 1 "$BOXES"); do
	name=box$i
	bd=$STATE_DIR/$name
	port=$(cat "$bd/port")
	# shellcheck disable=SC2086 # accel holds several words on purpose
	qemu-system-x86_64 -name "$name" $accel -smp "$SMP" -m "$MEM" \
		-nodefaults -display none -vga none -monitor none \
		-serial "file:$STATE_DIR/$name.log" \
		-kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.show_status=1 mitigations=off" \
		-drive "file=$bd/overlay.qcow2,if=virtio,format=qcow2" \
		-drive "file=$bd/seed.img,if=virtio,format=raw,readonly=on" \
		-netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" \
		-device virtio-net-pci,netdev=n0 \
		-pidfile "$STATE_DIR/$name.pid" -daemonize
	log "$name started (pid $(cat "$STATE_DIR/$name.pid"), ssh port $port, ${MEM} MiB)"
done

# wait_box polls SSH until the box answers or the deadline passes.
wait_box() {
	local name=$1 deadline=$(( t0 + BOOT_TIMEOUT ))
	while (( $(date +%s) < deadline )); do
		kill -0 "$(cat "$STATE_DIR/$name.pid")" 2>/dev/null || { log "$name: qemu exited; see $STATE_DIR/$name.log"; return 1; }
		if ssh -F "$STATE_DIR/ssh-config" -o ConnectTimeout=5 -o BatchMode=yes "$name" true 2>/dev/null; then
			echo $(( $(date +%s) - t0 )) >"$STATE_DIR/$name/boot_seconds"
			log "$name: ssh up after $(( $(date +%s) - t0 ))s"
			return 0
		fi
		sleep 3
	done
	log "$name: no ssh within ${BOOT_TIMEOUT}s; tail of $STATE_DIR/$name.log:"
	tail -20 "$STATE_DIR/$name.log" >&2
	return 1
}
pids=()
for i in $(seq 1 "$BOXES"); do wait_box "box$i" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
(( rc == 0 )) || die "boxes did not come up (left running for inspection; make testbed-down stops them)"
log "$BOXES box(es) up in $(( $(date +%s) - t0 ))s; ssh -F $STATE_DIR/ssh-config box1"
