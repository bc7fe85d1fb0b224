#!/bin/sh
# Refresh a vendored browser package from the npm registry (no build step: the package's own
# prebuilt files are copied with its licence), then record its version in the README beside it.
#   scripts/update-vendored.sh axe-core [VERSION]
set -eu
name=${1:?usage: scripts/update-vendored.sh PACKAGE [VERSION]}
version=${2:-latest}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$name@$version" >/dev/null && tar xzf ./*.tgz)
got=$(node -p "require('$work/package/package.json').version")
case "$name" in
  axe-core)
    dest="$root/tests/support/vendor/axe-core"
    mkdir -p "$dest"
    cp "$work/package/axe.min.js" "$work/package/LICENSE" "$dest/"
    sed -i "s/^| axe-core | [^|]* |/| axe-core | $got |/; s/axe-core@[0-9.]*/axe-core@$got/" "$root/tests/support/vendor/README.md"
    ;;
  *) echo "update-vendored: no recipe for $name" >&2; exit 2 ;;
esac
echo "vendored $name $got"
