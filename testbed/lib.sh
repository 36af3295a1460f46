# Shared helpers for the testbed scripts. Sourced, not executed.
# shellcheck shell=bash

TESTBED_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$TESTBED_DIR/.." && pwd)
STATE_DIR=${TESTBED_STATE:-$TESTBED_DIR/state}
CACHE_ROOT=${TESTBED_CACHE:-/var/cache/pgtune-testbed}

log() { printf '%s testbed: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# recipe_hash names the cached image: it changes whenever the recipe
# (image/recipe.env) or any file baked into the image changes, so a stale image is
# never reused, while edits to the scripts' logging or comments keep the cache.
recipe_hash() {
	(
		cd "$TESTBED_DIR"
		find image -type f | LC_ALL=C sort | xargs sha256sum
	) | sha256sum | cut -c1-16
}

image_dir() { echo "$CACHE_ROOT/$(recipe_hash)"; }

# debian_mirror prints the first configured mirror that serves the plain bookworm
# suite (not -security/-updates), from one-line .list files or deb822 .sources files.
debian_mirror() {
	local f uri
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -f $f ]] || continue
		uri=$(awk '$1=="deb" { i=2; if ($2 ~ /^\[/) { while (i<=NF && $i !~ /\]$/) i++; i++ }
			if ($(i+1)=="bookworm") { print $i; exit } }' "$f")
		[[ -n $uri ]] && { echo "${uri%/}"; return 0; }
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		# deb822: paragraphs separated by blank lines; pick one whose Suites has bookworm.
		uri=$(awk 'BEGIN{RS=""; FS="\n"}
			{ u=""; s=""; t=""
			  for (i=1;i<=NF;i++) {
			    if ($i ~ /^URIs:/) { u=$i; sub(/^URIs:[ \t]*/,"",u); split(u,a,/[ \t]+/); u=a[1] }
			    if ($i ~ /^Suites:/) { s=" " $i " " }
			    if ($i ~ /^Types:/) { t=$i }
			  }
			  if (t ~ /(^|[ \t])deb([ \t]|$)/ && s ~ /[ \t]bookworm[ \t]/ && u!="") { print u; exit } }' "$f")
		[[ -n $uri ]] && { echo "${uri%/}"; return 0; }
	done
	return 1
}

# accel_args picks KVM only when /dev/kvm exists and a probe boot of the real
# kernel reaches userspace (nested KVM can hang); otherwise TCG.
accel_args() {
	local cache="$STATE_DIR/accel"
	if [[ -f $cache ]]; then cat "$cache"; return; fi
	local acc="-accel tcg,thread=multi -cpu max"
	if [[ -e /dev/kvm && -z ${TESTBED_NO_KVM:-} ]] && kvm_probe; then
		acc="-accel kvm -cpu host"
	fi
	mkdir -p "$STATE_DIR"
	echo "$acc" >"$cache"
	echo "$acc"
}

# kvm_probe boots the image kernel with no root disk under KVM and waits for the
# kernel to get as far as looking for its root device; 60s without that is a hang.
kvm_probe() {
	local img; img=$(image_dir)
	local out; out=$(mktemp)
	timeout 60 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nographic -no-reboot \
		-kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
		-append "console=ttyS0 panic=-1 root=/dev/nonexistent rootdelay=1 rd.shell=0" \
		-serial "file:$out" -monitor none -display none >/dev/null 2>&1 || true
	if grep -q -e 'Run /init as init process' -e 'Freeing unused kernel' "$out"; then
		rm -f "$out"; return 0
	fi
	rm -f "$out"; return 1
}

box_port() { echo $(( ${TESTBED_BASE_PORT:-2220} + $1 )); }
