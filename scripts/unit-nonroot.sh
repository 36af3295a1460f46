#!/usr/bin/env bash
# Runs the unit tests (go test -short ./...) as an unprivileged user, to
# prove they need no root and touch no kernel: a copy of this tree with its
# dependencies vendored (no module cache or network needed), owned by
# $NONROOT_USER (created when missing), with its own build cache.
# Run as root: `make unit-nonroot`.
set -euo pipefail
cd "$(dirname "$0")/.."
user=${NONROOT_USER:-pgtune-unit}
go=${GO:-go}
if [ "$(id -u)" != 0 ]; then
  echo "unit-nonroot: run as root (it creates and switches to user $user); as any other user, 'make unit' is the same test" >&2
  exit 1
fi
id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"

work=$(mktemp -d /tmp/pgtune-unit-nonroot.XXXXXX)
trap 'rm -rf "$work"' EXIT
tar --exclude=./.git --exclude=./bin -cf - . | tar -xf - -C "$work"
"$go" mod vendor -o "$work/vendor"
chown -R "$user:" "$work"
chmod 0755 "$work"

# The build cache is the user's own and outlives the copy: a fresh one in
# the copy compiled the standard library and every dependency again on
# each run (measured on the shared, loaded 2-core VM: 241 CPU-s and 5 min
# for this step with it, 51-59 CPU-s and 1 min with a warm one).
# -trimpath keeps the copy's random directory out of the cache keys, so
# the project's unchanged packages are found there too. Test results are
# never taken from it (-count=1): the tests still run, as this user. A
# user without a home of its own gets a cache in the copy, as before.
cache=$(getent passwd "$user" | cut -d: -f6)/.cache/go-build
case $cache in
/?*/.cache/go-build) runuser -u "$user" -- mkdir -p "$cache" 2>/dev/null || cache=$work/.cache/go-build ;;
*) cache=$work/.cache/go-build ;;
esac

gobin=$(dirname "$(command -v "$go")")
runuser -u "$user" -- env -i \
  PATH="$gobin:/usr/local/bin:/usr/bin:/bin" \
  HOME="$work" \
  GOCACHE="$cache" \
  GOFLAGS="-mod=vendor -buildvcs=false -trimpath" \
  GOTOOLCHAIN=local \
  GOPROXY=off \
  sh -c 'cd "$1" && echo "unit tests as $(id -un) (uid $(id -u)):" && go test -short -count=1 ./...' sh "$work"
