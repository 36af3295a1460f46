#!/usr/bin/env bash
# Builds the testbed's Debian 12 box image with debootstrap and caches it under
# $TESTBED_CACHE (default /var/cache/pgtune-testbed/<recipe hash>/):
#   rootfs.img   raw ext4 root filesystem (the qcow2 backing file of every box)
#   vmlinuz, initrd.img   the image's own kernel and initramfs, booted directly
# A second run with the same recipe does nothing. Prints the image directory.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || die "build-image needs root (debootstrap, chroot)"
for t in debootstrap mkfs.ext4 unshare sha256sum; do
	command -v "$t" >/dev/null || die "missing $t: apt-get install debootstrap e2fsprogs"
done

# shellcheck source=image/recipe.env
. "$TESTBED_DIR/image/recipe.env"

dir=$(image_dir)
if [[ -f $dir/complete ]]; then
	log "image cached: $dir"
	echo "$dir"
	exit 0
fi

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.build.lock"
flock 9
if [[ -f $dir/complete ]]; then echo "$dir"; exit 0; fi

mirror=$(debian_mirror) || die "no bookworm mirror configured in /etc/apt/sources.list{,.d}"
log "building image $(basename "$dir") from $mirror (takes minutes)"
start=$(date +%s)

work=$(mktemp -d "$CACHE_ROOT/build.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
root=$work/root

debootstrap --variant=minbase --include="$BASE_PKGS" "$SUITE" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
	{ tail -30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
log "debootstrap done after $(( $(date +%s) - start ))s"

install -m 755 "$TESTBED_DIR/image/testbed-seed" "$root/usr/local/sbin/testbed-seed"
install -m 644 "$TESTBED_DIR/image/testbed-seed.service" "$root/etc/systemd/system/"
install -m 644 "$TESTBED_DIR/image/10-dhcp.network" "$root/etc/systemd/network/"
install -m 644 "$TESTBED_DIR/image/sshd-testbed.conf" "$root/etc/ssh/sshd_config.d/testbed.conf"
install -m 440 "$TESTBED_DIR/image/sudoers-vagrant" "$root/etc/sudoers.d/vagrant"
install -m 644 "$TESTBED_DIR/image/fstab" "$root/etc/fstab"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Drop-ins, not initramfs-tools' own conffiles, so its install never prompts.
install -D -m 644 "$TESTBED_DIR/image/initramfs-modules" "$root/usr/share/initramfs-tools/modules.d/testbed"
install -D -m 644 /dev/stdin "$root/etc/initramfs-tools/conf.d/testbed" <<<"MODULES=list"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

# The chroot phase runs in a private mount namespace: /proc, /sys and /dev/pts
# vanish with it even if the build dies half way.
unshare --mount --propagation private -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive ROOT="$root" EXTRA_PKGS="$EXTRA_PKGS" \
	bash -euo pipefail -c '
	mount -t proc proc "$ROOT/proc"
	mount -t sysfs sys "$ROOT/sys"
	mount --bind /dev "$ROOT/dev"
	mount -t devpts devpts "$ROOT/dev/pts" -o newinstance,ptmxmode=0666
	chroot "$ROOT" apt-get update -q
	chroot "$ROOT" apt-get install -y -q --no-install-recommends $EXTRA_PKGS
	chroot "$ROOT" useradd -m -s /bin/bash -G sudo vagrant
	chroot "$ROOT" passwd -l root
	chroot "$ROOT" systemctl enable systemd-networkd.service testbed-seed.service ssh.service postgresql.service
	chroot "$ROOT" systemctl mask systemd-networkd-wait-online.service
	for u in apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer; do
		[ -e "$ROOT/lib/systemd/system/$u" ] && chroot "$ROOT" systemctl mask "$u"
	done
	chroot "$ROOT" apt-get clean
' >"$work/chroot.log" 2>&1 || { tail -40 "$work/chroot.log" >&2; die "installing packages in the chroot failed"; }
log "packages installed after $(( $(date +%s) - start ))s"

rm -f "$root/usr/sbin/policy-rc.d" "$root"/etc/ssh/ssh_host_* "$root/etc/resolv.conf"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
# An empty machine-id makes every box generate its own on first boot.
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
echo testbed >"$root/etc/hostname"
ls "$root"/etc/postgresql/15/main/postgresql.conf >/dev/null || die "PostgreSQL 15 main cluster missing in image"

kver=$(ls "$root/boot" | sed -n 's/^vmlinuz-//p' | sort -V | tail -1)
[[ -n $kver ]] || die "no kernel in image"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"

mkfs.ext4 -q -F -L tbroot -d "$root" "$work/rootfs.img" "$IMAGE_SIZE" >&2 ||
	die "mkfs.ext4 -d failed"
rm -rf "$root"
{
	echo "recipe_version=$RECIPE_VERSION"
	echo "suite=$SUITE"
	echo "mirror=$mirror"
	echo "kernel=$kver"
	echo "base=$BASE_PKGS"
	echo "extra=$EXTRA_PKGS"
	echo "built=$(date -u +%FT%TZ)"
	echo "build_seconds=$(( $(date +%s) - start ))"
} >"$work/recipe.txt"

rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
touch "$dir/complete"
chmod 755 "$dir"
log "image built in $(( $(date +%s) - start ))s: $dir"
echo "$dir"
