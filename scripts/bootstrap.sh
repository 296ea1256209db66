#!/usr/bin/env bash
# Set up this machine for k26ctl: Debian packages for the lab host (as root), the package with its
# lab and test extras. `--test` also installs the test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
want_real=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    --real-sglang) want_real=1 ;;  # real SGLang releases for `lab host up --real` (about 20 GB, once)
    *) echo "usage: $0 [--test] [--real-sglang]" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  command -v ip >/dev/null || missing+=(iproute2)
  # the report tests open the pages in Debian's headless chromium
  [ "$want_test" = 1 ] && ! command -v chromium >/dev/null && missing+=(chromium)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  # watch: promtool tests the alert rules; the lab tests run a real Prometheus on loopback. The
  # package must not start its own (on all interfaces): policy-rc.d 101 for the install, no recommends.
  if [ "$want_test" = 1 ] && ! command -v promtool >/dev/null; then
    [ ${#missing[@]} -gt 0 ] || apt-get update -qq
    policy_made=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && policy_made=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    [ "$policy_made" = 0 ] || rm -f /usr/sbin/policy-rc.d
    if command -v systemctl >/dev/null && systemctl is-active -q prometheus 2>/dev/null; then
      systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
  fi
fi

python3 -m pip install -q --disable-pip-version-check torch==2.13.0
extras="lab,report"
[ "$want_test" = 1 ] && extras="lab,report,test"
python3 -m pip install -q --disable-pip-version-check -e ".[$extras]"
# pip byte-compiles a regular install, not an editable one. Without these .pyc files, and with
# PYTHONDONTWRITEBYTECODE set (as on the machines this project is developed and tested on), every
# k26ctl start compiles its own modules again: about 50 ms of `--version`, 0.1-0.2 s of a deploy.
python3 -m compileall -q -j 0 k26ctl >/dev/null
# The same for the tests, in the form pytest compiles them (assertions rewritten): one collection here
# writes them once. Without it, every xdist worker of the first run rewrites and compiles all the test
# modules itself, at the same time as the others (about 3.5 s of CPU each, four times over with -n 4).
if [ "$want_test" = 1 ] && ! python3 -m pytest -q --collect-only -p no:cacheprovider >/dev/null 2>&1; then
  echo "bootstrap: the tests do not collect; pytest will say why when they run" >&2
fi
# under pyenv the new `k26ctl` command is on PATH only after its shims are rebuilt
if command -v pyenv >/dev/null; then pyenv rehash; fi
# the real SGLang releases (0.5.15, 0.5.23) into the machine-wide cache, each installed once
if [ "$want_real" = 1 ]; then python3 -m k26ctl.lab.real.releases; fi
