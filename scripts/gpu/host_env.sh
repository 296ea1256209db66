#!/bin/bash
# On the GPU machine, in the checkout root: `bash .gpu-proj/scripts/gpu/host_env.sh` installs what
# build_host.sh carried in .gpu-host/ so that `k26ctl lab host up --gpu` boots there. Safe to run again.
# The image merges /usr (/bin -> usr/bin); Debian's packages carry ./bin and ./lib, and unpacking them
# onto / would replace those links by folders (and /bin/sh with them). So: unpack into a staging folder,
# move bin, sbin, lib and lib64 under usr/, then copy onto / without overwriting anything the image has.
set -euo pipefail
if [ ! -x /usr/bin/systemd-nspawn ] || [ ! -x /usr/sbin/sshd ]; then
  STAGE=$(mktemp -d /tmp/k26-debs.XXXXXX)
  mkdir -p "$STAGE/debs" "$STAGE/root"
  tar xf .gpu-host/debs.tar -C "$STAGE/debs"
  for deb in "$STAGE"/debs/*.deb; do dpkg-deb -x "$deb" "$STAGE/root"; done
  for d in bin sbin lib lib64; do
    if [ -d "$STAGE/root/$d" ] && [ ! -L "$STAGE/root/$d" ]; then
      mkdir -p "$STAGE/root/usr/$d"
      cp -a "$STAGE/root/$d/." "$STAGE/root/usr/$d/" && rm -rf "${STAGE:?}/root/$d"
    fi
  done
  cp -a -n "$STAGE/root/." /
  ldconfig
  rm -rf "$STAGE"
fi
[ -s /etc/machine-id ] || systemd-machine-id-setup >/dev/null  # nspawn refuses to boot without one
id sshd >/dev/null 2>&1 || useradd -r -d /run/sshd -s /usr/sbin/nologin sshd  # sshd's privilege separation
if [ ! -d /tmp/k26-client-site/paramiko ]; then
  mkdir -p /tmp/k26-client-site && tar xJf .gpu-host/client-site.txz -C /tmp/k26-client-site
fi
