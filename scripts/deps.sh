#!/bin/sh
# deps.sh PACKAGE...: installs the Debian packages among PACKAGE that are
# not installed, with apt-get: directly as root, otherwise through sudo.
# Installs nothing, and prints nothing, when every package is installed.
# `make deps` runs it; scripts/deps_test.go tests it.
set -eu

missing=""
for p in "$@"; do
	# a removed package can still be known to dpkg ("deinstall ok
	# config-files"): only "install ok installed" counts
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing="$missing $p"
done
[ -n "$missing" ] || exit 0

if [ "$(id -u)" = 0 ]; then
	as_root=""
elif command -v sudo >/dev/null 2>&1; then
	as_root="sudo"
else
	echo "deps.sh: these Debian packages are missing:$missing; run as root, or install sudo" >&2
	exit 1
fi
echo "installing:$missing"
# env carries the setting through sudo, which resets the environment
$as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
