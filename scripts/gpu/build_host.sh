#!/bin/bash
# The GPU lab host's kit (on a machine WITH network, Debian 12, no GPU needed): what the GPU image lacks to
# run `k26ctl lab host up --gpu` (systemd as PID 1 in nspawn, OpenSSH, ip) and k26ctl's client side
# (paramiko and its native wheels). Facts: ../../docs/real-gpu-loop.md and shared/docs/gpu-lab-host.md.
#
#   bash scripts/gpu/build_host.sh [ROOT]      writes ROOT/.gpu-host/ (about 20 MiB; git ignores it)
#
# It travels in its own call to the GPU machine (with .gpu-proj/), after the call that carried .gpu/:
# one call carries at most 64 MiB. There, `bash .gpu-proj/scripts/gpu/host_env.sh` installs it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "${1:-$HERE/../..}" && pwd)
DL="${TMPDIR:-/tmp}/k26-gpu-host-download"
EXCLUDE=$(git -C "$ROOT" rev-parse --path-format=absolute --git-path info/exclude)
grep -qx "/.gpu-host/" "$EXCLUDE" 2>/dev/null || echo "/.gpu-host/" >> "$EXCLUDE"
rm -rf "$ROOT/.gpu-host" "$DL/site" && mkdir -p "$ROOT/.gpu-host" "$DL/debs" "$DL/whl" "$DL/site"

# Debian 12's systemd, nspawn, OpenSSH, iproute2 and the libraries the Ubuntu image lacks (ldd of
# systemd, systemd-nspawn, sshd, ip, systemctl and ssh-keygen there: nothing else missing).
DEBS=(systemd systemd-container libsystemd-shared openssh-server openssh-client openssh-sftp-server iproute2
  dbus libcryptsetup12 libip4tc2 libbpf1 libelf1 libmnl0 libxtables12 libwrap0 libkmod2 libseccomp2
  libapparmor1 libsystemd0 libdbus-1-3 libnsl2 libtirpc3)
(cd "$DL/debs" && apt-get download "${DEBS[@]}" >/dev/null 2>&1)
tar cf "$ROOT/.gpu-host/debs.tar" -C "$DL/debs" .

# k26ctl's client on the image's Python 3.12: paramiko (with its native wheels) and the CLI's packages.
# Installed last on PYTHONPATH there, so the image's and .gpu's own versions win where both have one.
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$DL/whl" paramiko typer rich httpx pyyaml jinja2 prometheus-client regex
python3 -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --target "$DL/site" "$DL"/whl/*.whl
rm -rf "$DL/site/bin"
find "$DL/site" -name __pycache__ -prune -exec rm -rf {} +
tar cf - -C "$DL/site" . | nice xz -T2 -6 > "$ROOT/.gpu-host/client-site.txz"
du -sh "$ROOT/.gpu-host"
