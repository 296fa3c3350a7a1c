#!/usr/bin/env bash
# Vendors the uPlot charting library the run report embeds: downloads uplot@VERSION from npm, checks the
# tarball against the integrity npm recorded for it, and copies dist/uPlot.iife.min.js, dist/uPlot.min.css
# and LICENSE into report/assets/uplot/. Update the version and integrity in its README.md afterwards.
set -euo pipefail
version=${1:?usage: scripts/vendor-uplot.sh VERSION}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
want=$(npm view "uplot@$version" dist.integrity)
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null)
got="sha512-$(openssl dgst -sha512 -binary "$tmp/uplot-$version.tgz" | base64 -w0)"
if [ "$got" != "$want" ]; then
  echo "uplot@$version: tarball integrity $got, npm records $want" >&2
  exit 1
fi
tar -xzf "$tmp/uplot-$version.tgz" -C "$tmp"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/package/LICENSE" report/assets/uplot/
echo "report/assets/uplot: uplot@$version ($want)"
