#!/usr/bin/env bash
# Set up this machine for k26ctl: Debian packages for the lab host (as root), the package with its
# lab and test extras. `--test` also installs the test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    *) echo "usage: $0 [--test]" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  command -v ip >/dev/null || missing+=(iproute2)
  # watch: promtool tests the alert rules, a real Prometheus scrapes `k26ctl watch` in the lab tests
  [ "$want_test" = 1 ] && { command -v promtool >/dev/null || missing+=(prometheus); }
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    # policy-rc.d 101: no package may start its service (Prometheus would listen on all interfaces)
    had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1
    [ "$had_policy" = 1 ] || printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [ "$had_policy" = 1 ] || rm -f /usr/sbin/policy-rc.d
    # where an init did start it anyway, stop it: the tests run their own on loopback
    if command -v systemctl >/dev/null && systemctl is-active -q prometheus 2>/dev/null; then
      systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
  fi
fi

python3 -m pip install -q --disable-pip-version-check torch==2.13.0
extras="lab"
[ "$want_test" = 1 ] && extras="lab,test"
python3 -m pip install -q --disable-pip-version-check -e ".[$extras]"
# pip byte-compiles a regular install, not an editable one. Without these .pyc files, and with
# PYTHONDONTWRITEBYTECODE set (as on the machines this project is developed and tested on), every
# k26ctl start compiles its own modules again: about 50 ms of `--version`, 0.1-0.2 s of a deploy.
python3 -m compileall -q -j 0 k26ctl >/dev/null
# under pyenv the new `k26ctl` command is on PATH only after its shims are rebuilt
if command -v pyenv >/dev/null; then pyenv rehash; fi
