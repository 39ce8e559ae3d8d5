#!/bin/sh
# deps-arm64.sh — what `make test-arm64` needs on a Debian (bookworm) x86-64 machine: the
# cross compiler, qemu-user, and petrel's libraries for arm64 (dpkg multiarch). Installs
# what is missing when run as root; otherwise says what to install.
set -e
pkgs=""
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || pkgs="$pkgs gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
command -v qemu-aarch64-static >/dev/null 2>&1 || pkgs="$pkgs qemu-user-static"
for p in libjansson-dev libssl-dev libpcre2-dev libxxhash-dev libmicrohttpd-dev liburing-dev \
         libcurl4-openssl-dev; do
    dpkg -s "$p:arm64" >/dev/null 2>&1 || pkgs="$pkgs $p:arm64"
done
[ -z "$pkgs" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "make test-arm64 needs (as root: dpkg --add-architecture arm64; apt-get install):$pkgs" >&2
    exit 1
fi
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >/dev/null
