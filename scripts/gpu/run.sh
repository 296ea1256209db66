#!/bin/bash
# The project's GPU check, part 2 of 2: on a machine with one NVIDIA GPU and no network, in the root of
# a checkout that carries build.sh's folders (.gpu, .gpu-proj; .gpu-models after the first run):
#
#   bash .gpu-proj/scripts/gpu/run.sh OUTDIR [CONFIG,...]
#   env: K26_GPU_BUDGET seconds (default 560), K26_GPU_MIN_LEFT (start no server with less left, 90)
#
# Makes the models (or unpacks .gpu-models/models.tgz), then runs run_check.py until the budget is
# spent. OUTDIR gets real-gpu.json, real-gpu.md, reference.json, smoke-baseline.json, logs.tgz, and
# models.tgz (the two trained models) when the models were made here. For a later run put models.tgz, reference.json,
# smoke-baseline.json and real-gpu.json into .gpu-models/: it reuses the models and the baseline and
# merges its results into the earlier ones.
set -uo pipefail
OUT=$(mkdir -p "$1" && cd "$1" && pwd); CONFIGS=${2:-}
BUDGET=${K26_GPU_BUDGET:-560}
KIT=.gpu-proj/scripts/gpu; [ -d "$KIT" ] || KIT=scripts/gpu  # the checkout itself when it travelled whole
source "$KIT/env.sh"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
python3 -c "import sglang, sgl_kernel; from k26ctl.smoke.detectors import score_text; print(\"imports ok\", sglang.__file__, score_text(\"The sea is blue and the sky is clear today.\").findings)" 2>&1 | tail -2
MODELS=/tmp/k26-models
if [ -f .gpu-models/models.tgz ]; then  # the trained models of an earlier run; the random ones again
  mkdir -p "$MODELS" && tar xzf .gpu-models/models.tgz -C "$MODELS"
  python3 "$KIT"/make_models.py "$MODELS" --random-only || exit 1
elif [ -f "$MODELS/random-target/config.json" ]; then  # made earlier on this machine (loop.sh, a call before)
  echo "models: made earlier in $MODELS"
else
  python3 "$KIT"/make_models.py "$MODELS" || exit 1
  tar czf "$OUT/models.tgz" -C "$MODELS" lab-target lab-draft
fi
ARGS=(--models "$MODELS" --out "$OUT" --deadline $((BUDGET - SECONDS)) --min-left "${K26_GPU_MIN_LEFT:-90}")
[ -f .gpu-models/reference.json ] && ARGS+=(--reference .gpu-models)
[ -f .gpu-models/real-gpu.json ] && ARGS+=(--previous .gpu-models/real-gpu.json)
[ -n "$CONFIGS" ] && ARGS+=(--configs "$CONFIGS")
python3 "$KIT"/run_check.py "${ARGS[@]}"
