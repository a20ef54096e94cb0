#!/usr/bin/env bash
# Renders a gpusched report (or any local HTML file) to a PNG with headless
# Chromium, to look at it or to put a picture of it in the docs.
#
#   scripts/render-report.sh [--install] REPORT.html OUT.png [WIDTH HEIGHT]
#
# WIDTH x HEIGHT is the browser window (default 1400 x 1600); the picture is
# the top of the page at that size. Chromium is $CHROMIUM when set, else
# chromium (Debian's package: /usr/bin/chromium) or chromium-browser on PATH.
# If it is missing, the script says how to install it; with --install it
# runs "apt-get install -y chromium" itself (as root, or through sudo).
#
# The browser runs with a new, empty profile that is removed afterwards, no
# sandbox (so it works as root and in containers), and its background network
# traffic turned off: the report is a single file and needs no network.
set -euo pipefail

usage() {
	echo "usage: $0 [--install] REPORT.html OUT.png [WIDTH HEIGHT]" >&2
	exit 2
}

install=0
if [[ ${1:-} == --install ]]; then
	install=1
	shift
fi
[[ $# == 2 || $# == 4 ]] || usage
in=$1 out=$2 width=${3:-1400} height=${4:-1600}
[[ $width =~ ^[0-9]+$ && $height =~ ^[0-9]+$ ]] || { echo "$0: WIDTH and HEIGHT must be numbers of pixels" >&2; exit 2; }
[[ -f $in ]] || { echo "$0: $in: no such file" >&2; exit 2; }

find_chromium() {
	if [[ -n ${CHROMIUM:-} ]]; then
		command -v "$CHROMIUM" && return 0
		return 1
	fi
	command -v chromium || command -v chromium-browser || { [[ -x /usr/bin/chromium ]] && echo /usr/bin/chromium; }
}

if ! browser=$(find_chromium); then
	if [[ $install == 1 ]]; then
		sudo=""
		[[ $(id -u) == 0 ]] || sudo=sudo
		$sudo apt-get install -y chromium >&2
		browser=$(find_chromium) || { echo "$0: chromium is still not found after installing it" >&2; exit 1; }
	else
		echo "$0: chromium not found. Install it with" >&2
		echo "    sudo apt-get install -y chromium" >&2
		echo "(Debian's package; on Ubuntu: chromium-browser), set CHROMIUM=/path/to/chromium, or rerun with --install." >&2
		exit 1
	fi
fi

abs_in=$(cd "$(dirname "$in")" && pwd)/$(basename "$in")
mkdir -p "$(dirname "$out")"
abs_out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
profile=$(mktemp -d "${TMPDIR:-/tmp}/render-report.XXXXXX")
trap 'rm -rf "$profile"' EXIT
rm -f "$abs_out"

# Chromium prints harmless complaints (no D-Bus, no GPU) on stderr; keep them
# out of the way unless it fails.
log="$profile/chromium.log"
if ! "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$profile/profile" --hide-scrollbars \
	--window-size="$width,$height" --screenshot="$abs_out" "file://$abs_in" >"$log" 2>&1; then
	cat "$log" >&2
	echo "$0: chromium failed" >&2
	exit 1
fi
if [[ ! -s $abs_out ]]; then
	cat "$log" >&2
	echo "$0: chromium wrote no picture" >&2
	exit 1
fi
echo "$abs_out"
