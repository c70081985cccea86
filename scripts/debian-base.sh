#!/bin/sh
# A Debian bookworm base image made from Debian's own packages, for machines that cannot pull
# python:3.11-slim / redis:7.2 / postgres:15 from a registry (make base-image; the container tests).
#   sh scripts/debian-base.sh [TAG]          # default local/debian:bookworm; needs root + debootstrap
# The mirror is the first deb.debian.org-style URI in /etc/apt/sources.list*, else DEBIAN_MIRROR.
set -eu
TAG=${1:-local/debian:bookworm}
DOCKER=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}
MIRROR=${DEBIAN_MIRROR:-$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list \
    /etc/apt/sources.list.d 2>/dev/null | grep -oE 'https?://[^ ]+' | head -n 1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
ROOTFS=$(mktemp -d /tmp/debian-base.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 \
    || { tail -n 5 "$ROOTFS.log" >&2; rm -f "$ROOTFS.log"; exit 1; }
rm -f "$ROOTFS.log"
SECURITY=${MIRROR%/debian}/debian-security
cat >"$ROOTFS/etc/apt/sources.list" <<LIST
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
LIST
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb
tar -C "$ROOTFS" -c . | "$DOCKER" import -c 'CMD ["bash"]' - "$TAG" >/dev/null
echo "$TAG"
