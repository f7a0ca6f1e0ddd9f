#!/usr/bin/env bash
# Installs the Debian packages the project needs, if any is missing.
# Debian 12: libfabric 1.17 from the distribution, CMake, a C11 compiler.
#   scripts/install-deps.sh          what building and the main job need
#   scripts/install-deps.sh --test   also what the tests need: autotools to
#                                    build libfabric 2.x from Debian 13's source
#                                    package (scripts/libfabric-2x.sh), ccache to
#                                    share objects between scripts/test.sh's builds
set -euo pipefail

packages=(build-essential cmake pkg-config libfabric-dev libfabric-bin iproute2)
if [ "${1:-}" = --test ]; then
  packages+=(autoconf automake libtool xz-utils util-linux ccache)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
