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

gobin=$(dirname "$(command -v "$go")")
runuser -u "$user" -- env -i \
  PATH="$gobin:/usr/local/bin:/usr/bin:/bin" \
  HOME="$work" \
  GOCACHE="$work/.cache/go-build" \
  GOFLAGS="-mod=vendor -buildvcs=false" \
  GOTOOLCHAIN=local \
  GOPROXY=off \
  sh -c 'cd "$1" && echo "unit tests as $(id -un) (uid $(id -u)):" && go test -short -count=1 ./...' sh "$work"
