#!/usr/bin/env bash
# The hand-written baseline k26ctl replaces: copy the unit, reload, restart, then ask /health over a new
# ssh connection every INTERVAL seconds until it answers 200 (the seed deployment used 15 s).
# Host keys are checked strictly against the given known_hosts file.
#
# usage: curl_loop.sh ADDRESS KEY KNOWN_HOSTS UNIT_FILE INTERVAL [PORT] [UNIT_PATH] [MAX_WAIT]
set -euo pipefail

if [ "$#" -lt 5 ]; then
    sed -n '2,7p' "$0" >&2
    exit 2
fi
address=$1 key=$2 known_hosts=$3 unit_file=$4 interval=$5
port=${6:-30000}
unit_path=${7:-/etc/systemd/system/sglang.service}
max_wait=${8:-600}

opts=(-i "$key" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes
      -o UserKnownHostsFile="$known_hosts" -o ConnectTimeout=10 -o LogLevel=ERROR)

scp -q "${opts[@]}" "$unit_file" "root@$address:$unit_path"
ssh "${opts[@]}" "root@$address" "systemctl daemon-reload && systemctl restart ${unit_path##*/}"

start=$SECONDS
until ssh "${opts[@]}" "root@$address" "curl -sf -o /dev/null --max-time 5 http://127.0.0.1:$port/health"; do
    if (( SECONDS - start > max_wait )); then
        echo "curl_loop: /health not ready after ${max_wait}s" >&2
        exit 1
    fi
    sleep "$interval"
done
echo "curl_loop: healthy after $((SECONDS - start))s (interval ${interval}s)" >&2
