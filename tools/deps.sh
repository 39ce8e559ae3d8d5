#!/bin/sh
# deps.sh — make sure petrel's build dependencies are present.
# Debian/Ubuntu as root: installs them with apt-get. macOS: with Homebrew.
# Otherwise: prints the package names and fails. Cheap when all is present.
set -e
DEB_PKGS="pkg-config libjansson-dev libssl-dev liburing-dev libpcre2-dev libmicrohttpd-dev libxxhash-dev libcurl4-openssl-dev"
BREW_PKGS="pkg-config jansson openssl@3 pcre2 libmicrohttpd xxhash curl"

have_all() {
    command -v pkg-config >/dev/null 2>&1 || return 1
    pkg-config --exists jansson || return 1
    pkg-config --exists libpcre2-8 || return 1
    pkg-config --exists libcrypto || return 1
    pkg-config --exists libmicrohttpd || return 1
    pkg-config --exists libxxhash || return 1 # expert-record checksums (format/xpack.c)
    # petrel pull and -hf (cli/pull.c); macOS has libcurl (curl-config) without a .pc file
    pkg-config --exists libcurl || command -v curl-config >/dev/null 2>&1 || return 1
    # io_uring is Linux-only; elsewhere the pread pool is used
    if [ "$(uname -s)" = Linux ]; then pkg-config --exists liburing || return 1; fi
    return 0
}

have_all && exit 0

case "$(uname -s)" in
Darwin)
    if command -v brew >/dev/null 2>&1; then
        echo "deps: installing with Homebrew: $BREW_PKGS" >&2
        brew install $BREW_PKGS
        exit 0
    fi
    echo "deps: missing build dependencies; install Homebrew, then: brew install $BREW_PKGS" >&2
    exit 1 ;;
*)
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "deps: installing with apt-get: $DEB_PKGS" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2 || true
        apt-get install -y -qq $DEB_PKGS >&2
        exit 0
    fi
    echo "deps: missing build dependencies; install them with: sudo apt-get install $DEB_PKGS" >&2
    exit 1 ;;
esac
