#!/usr/bin/env bash
# Installs, with apt-get, what the integration tests need and this machine
# lacks: an sshd to test against, sudo for become, PostgreSQL 15,
# ansible-inventory to compare inventories with, Patroni and etcd.
# `deps.sh testbed` also installs what the qemu testbed needs.
# Idempotent and quiet when everything is there.
set -euo pipefail

need=()
if [ "${1:-}" = testbed ]; then
	command -v debootstrap >/dev/null || need+=(debootstrap)
	command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
	command -v qemu-img >/dev/null || need+=(qemu-utils)
	command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
	command -v ip >/dev/null || need+=(iproute2)
	command -v python3 >/dev/null || need+=(python3)
fi
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
command -v sudo >/dev/null || need+=(sudo)
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
command -v sysctl >/dev/null || need+=(procps)
command -v flock >/dev/null || need+=(util-linux)
# A WAL sender over a unix socket is tied to its standby by the socket's
# other end, which only ss (sock_diag) lists.
command -v ss >/dev/null || need+=(iproute2)
# The inventory corpus is compared with what Ansible itself resolves
# (ansible-core alone: ansible-inventory, ~20 s to install).
command -v ansible-inventory >/dev/null || need+=(ansible-core)
# Replicated clusters under Patroni are tested against a real Patroni with
# a real etcd (their services stay off: the tests start their own).
[ -x /usr/bin/patroni ] || need+=(patroni)
[ -x /usr/bin/etcd ] || need+=(etcd-server)

[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${need[*]}; run as root or: sudo apt-get install -y ${need[*]}" >&2
	exit 1
fi
echo "deps: installing ${need[*]}" >&2
# Packages must not start their services (a system sshd on :22, a default
# cluster on :5432): the tests start their own on loopback.
policy=/usr/sbin/policy-rc.d
had_policy=false
[ -e "$policy" ] && had_policy=true
if ! $had_policy; then
	printf '#!/bin/sh\nexit 101\n' > "$policy"
	chmod 0755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
