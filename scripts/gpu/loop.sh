#!/bin/bash
# The users' loop on the GPU machine (`k26ctl lab demo --gpu`), in the checkout root, with .gpu/ and
# .gpu-host/ carried (scripts/gpu/build.sh and build_host.sh made them here):
#
#   bash scripts/gpu/loop.sh OUTDIR [STEPS]      STEPS: broken,bisect,fixed,sweep (default all)
#
# Unpacks the kits (once while the machine stays up), makes the models (once), runs the demo's STEPS and
# leaves in OUTDIR the demo's output and --record JSON, the service's journal (short-iso-precise, for
# the restart phases) and the host's deploy history. A later call on the same warm machine runs the next
# steps against the same lab host. Env: K26_COLD_WARM=1 adds one cold and one warm restart at the end;
# K26_CALL_LIMIT (s, default 585) bounds the whole script; K26_DOCTOR=1 runs `k26ctl doctor` on the host
# after the demo (doctor.json, doctor-bundle.json, doctor.txt).
set -uo pipefail
OUT=$(mkdir -p "$1" && cd "$1" && pwd); STEPS=${2:-broken,bisect,fixed,sweep}
TAG=$(echo "$STEPS" | tr , -)
source scripts/gpu/env.sh
bash scripts/gpu/host_env.sh || { echo "host kit failed"; exit 1; }
echo "kits ready at ${SECONDS} s; python $(command -v python3)"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
if [ ! -f /tmp/k26-models/lab-target/config.json ]; then
  python3 scripts/gpu/make_models.py /tmp/k26-models > "$OUT/models.log" 2>&1 || { tail -20 "$OUT/models.log"; exit 1; }
  echo "models made at ${SECONDS} s"
fi
# k26ctl runs from the checkout (PYTHONPATH) with no installed metadata, but finds its host kinds
# (host.lab) through entry points: give it a dist-info of its own that declares them, from pyproject.toml
python3 - <<'PY'
import pathlib, tomllib
project = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"]
info = pathlib.Path("/tmp/k26-client-site/k26ctl-0.0.0.dist-info")
info.mkdir(parents=True, exist_ok=True)
(info / "METADATA").write_text("Metadata-Version: 2.1\nName: k26ctl\nVersion: 0.0.0\n")
groups = project.get("entry-points", {})
(info / "entry_points.txt").write_text(
    "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for g, eps in groups.items())
)
PY
# What SGLang's processes are doing, seen from this machine, every 2 s while the demo runs: a process that
# outlives SIGKILL shows its state (D: in the kernel, Z: not reaped) and, once, its kernel stack.
sample_processes() {
  while :; do
    ps -eo pid=,ppid=,stat=,etimes=,wchan:32=,comm= | awk -v t="$SECONDS" '$6 ~ /sglang|python/ {print t, $0}'
    for pid in $(ps -eo pid=,stat=,comm= | awk '$2 ~ /^[DZ]/ && $3 ~ /sglang|python/ {print $1}'); do
      [ -e "/tmp/k26-stack-$pid" ] && continue
      { echo "== $SECONDS s pid $pid"; cat "/proc/$pid/status" 2>/dev/null | grep -E '^(State|PPid|Threads)';
        cat "/proc/$pid/stack" 2>/dev/null | head -12; } > "/tmp/k26-stack-$pid"
      cat "/tmp/k26-stack-$pid"
    done
    sleep 2
  done
}
sample_processes > "$OUT/processes-$TAG.txt" 2>&1 &
SAMPLER=$!
# the call's limit (K26_CALL_LIMIT s from this script's start, default 585): stop the demo in time to
# fetch the journal and the history
timeout --signal=INT --kill-after=10 $(( ${K26_CALL_LIMIT:-585} - SECONDS - 15 )) \
  python3 -m k26ctl lab demo --gpu --steps "$STEPS" --record "$OUT/loop-$TAG.json" > "$OUT/demo-$TAG.log" 2>&1
echo "demo exit $? at ${SECONDS} s"; kill "$SAMPLER" 2>/dev/null; cat "$OUT/demo-$TAG.log" | tail -60
grep -h "^== " -A14 /tmp/k26-stack-* 2>/dev/null | head -40
host() {  # a command on the lab host over plain OpenSSH, as an operator would
  python3 - "$@" <<'PY'
import subprocess, sys
from k26ctl.lab.host import load_state
state = load_state("k26gpu")
sys.exit(subprocess.run(state.openssh_argv() + sys.argv[1:]).returncode if state else 1)
PY
}
if [ "${K26_COLD_WARM:-0}" = 1 ]; then
  for kind in cold warm; do
    [ "$kind" = cold ] && host rm -rf /var/cache/k26gpu-sglang/triton
    python3 -m k26ctl deploy profiles/lab/gpu/ngram-16.yaml --set host.lab=k26gpu --yes --force --no-smoke \
      --json > "$OUT/restart-$kind.json" 2> "$OUT/restart-$kind.log"
    echo "$kind restart: exit $? at ${SECONDS} s"
  done
fi
if [ "${K26_DOCTOR:-0}" = 1 ]; then  # the first-day check on the host as the demo left it
  python3 -m k26ctl doctor profiles/lab/gpu/ngram-16.yaml --set host.lab=k26gpu --json \
    --bundle "$OUT/doctor-bundle.json" > "$OUT/doctor.json" 2> "$OUT/doctor.log"
  echo "doctor: exit $? at ${SECONDS} s"
  python3 -m k26ctl doctor --explain "$OUT/doctor-bundle.json" > "$OUT/doctor.txt" 2>&1; cat "$OUT/doctor.txt"
fi
host journalctl -u k26gpu-sglang.service -o short-iso-precise --no-pager -a > "$OUT/journal-$TAG.txt" 2>&1
host cat /var/lib/k26ctl/k26gpu-sglang/history.jsonl > "$OUT/history.jsonl" 2>&1
echo "done at ${SECONDS} s"
