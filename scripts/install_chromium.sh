#!/usr/bin/env bash
# Install Debian's headless-capable Chromium for the HTML report tests (tests/report/).
# Does nothing when /usr/bin/chromium is already there; safe to run before every `make test`.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install_chromium.sh: $CHROMIUM is missing and this user cannot install packages;" \
        "install Debian's 'chromium' package as root" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
"$CHROMIUM" --version
