#!/usr/bin/env bash
# Render an HTML report with headless Chromium, offline, to a PNG screenshot.
#
#   scripts/screenshot-report.sh [out/report/report.html] [target/report.png] [WIDTHxHEIGHT]
#
# Installs Chromium with apt-get if it is missing (Debian/Ubuntu; needs root). Chromium runs with a
# fresh profile, no background networking, no component updates and no sync, so a page that
# needed the network would show its gaps in the screenshot.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
html="$(realpath "${1:-$root/out/report/report.html}")"
png="$(realpath -m "${2:-$root/target/report.png}")"
size="${3:-1280x2400}"

browser=""
for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then browser="$b"; break; fi
done
if [ -z "$browser" ]; then
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
    browser=chromium
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
    --user-data-dir="$profile" --window-size="${size/x/,}" \
    --screenshot="$png" "file://$html" 2>/dev/null
echo "screenshot: $png"
