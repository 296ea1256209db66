#!/bin/bash
# The project's GPU check, part 1 of 2 (on a machine WITH network, no GPU needed): build what the GPU
# machine needs, as folders of a checkout that git ignores. Part 2 (scripts/gpu/run.sh) runs there.
#
#   bash scripts/gpu/build.sh [ROOT]      ROOT: the checkout that travels to the GPU machine (default: this one)
#
# Writes, each listed in ROOT/.git/info/exclude:
#   ROOT/.gpu/        sglang 0.5.15 and the packages its serve path needs that the GPU image (Python 3.12,
#                     torch 2.11.0+cu130) lacks or has in a version that breaks it; sglang-kernel 0.4.4
#                     trimmed to its Hopper ops; the flashinfer stand-in; k26ctl's word lists, cached
#                     (~55 MiB: one GPU call carries at most 64 MiB)
#   ROOT/.gpu-proj/   this checkout's k26ctl and scripts/gpu (the GPU run imports these, first on PYTHONPATH)
# ROOT/.gpu-models/ comes back from the first GPU run (the trained models), for the later ones.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
ROOT=$(cd "${1:-$SRC}" && pwd)
DL="${TMPDIR:-/tmp}/k26-gpu-download"
# a worktree's .git is a file: ask git where its exclude file is
EXCLUDE=$(git -C "$ROOT" rev-parse --path-format=absolute --git-path info/exclude)
mkdir -p "$(dirname "$EXCLUDE")"
for d in /.gpu/ /.gpu-proj/ /.gpu-models/ /.gpu-host/; do
  grep -qx "$d" "$EXCLUDE" 2>/dev/null || echo "$d" >> "$EXCLUDE"
done
rm -rf "$ROOT/.gpu" "$ROOT/.gpu-proj"
mkdir -p "$ROOT/.gpu/stub/flashinfer" "$ROOT/.gpu/words" "$ROOT/.gpu-proj" "$DL"

download() {  # wheels for the GPU image: CPython 3.12 on manylinux x86-64
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 \
    --platform manylinux1_x86_64 "$@"
}
# sglang 0.5.15 is a platform wheel (pip finds it only for manylinux_2_34). The image's transformers 5.17
# cannot import it ("'qwen3_asr' is already used by a Transformers config"): 5.12.1 with tokenizers
# 0.22.2. fastapi 0.120.0: later ones import opentelemetry. apache-tvm-ffi compiles NGRAM's corpus.
WHEELS=(sglang==0.5.15 transformers==5.12.1 tokenizers==0.22.2
  annotated-types==0.8.0 cffi==2.1.1 compressed-tensors==0.20.1 dill==0.4.1 distro==1.9.0 fastapi==0.120.0
  gguf==0.19.0 ipython==9.18.1 jiter==0.19.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
  loguru==0.7.3 msgspec==0.23.0 openai==2.6.1 orjson==3.13.0 partial-json-parser==0.2.1.1.post7
  pybase64==1.5.1 pycparser==3.12 pydantic==2.14.4 pydantic-core==2.50.5 python-multipart==0.0.34
  pyzmq==27.3.0 referencing==0.37.0 rpds-py==2026.9.1 setproctitle==1.3.8 sniffio==1.3.1 soundfile==0.13.1
  starlette==0.48.0 traitlets==5.16.1 typing-inspection==0.4.5 uvicorn==0.55.0 apache-tvm-ffi==0.1.11
  ftfy==6.3.1 langcodes==3.5.1 locate==1.1.1 wcwidth==0.9.4)
rm -rf "$DL/site" && mkdir -p "$DL/whl" "$DL/site"
for spec in "${WHEELS[@]}"; do
  name=${spec%%==*}; norm=$(echo "$name" | tr '-' '_')
  ls "$DL"/"$norm"-"${spec##*==}"-*.whl >/dev/null 2>&1 || download -d "$DL" "$spec"
  cp "$DL"/"$norm"-"${spec##*==}"-*.whl "$DL/whl/"
done
# Installed here for the GPU image's Python and packed with xz: a third smaller than the wheels' zip,
# which keeps the carried folders under one call's 64 MiB.
python3 -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --target "$DL/site" "$DL"/whl/*.whl
# not on the serve path (nothing under sglang/srt imports them): diffusion generation, the gRPC server, tests
rm -rf "$DL/site/bin" "$DL/site/sglang/multimodal_gen" "$DL/site/sglang/srt/grpc" "$DL/site/sglang/test" \
  "$DL/site/sglang/benchmark"
find "$DL/site" -name __pycache__ -prune -exec rm -rf {} +
tar cf - -C "$DL/site" . | nice xz -T2 -6 > "$ROOT/.gpu/site.txz"

# sglang-kernel 0.4.4 (built for torch 2.11 / CUDA 13) is a 615 MB wheel, mostly FA3 (flash_ops) that
# the Triton backend does not use: keep the python files, sm90/common_ops, spatial_ops and the
# dist-info (sglang checks the version through it).
ls "$DL"/sglang_kernel-0.4.4-*.whl >/dev/null 2>&1 || download -d "$DL" sglang-kernel==0.4.4
rm -rf "$DL/kernel" && mkdir -p "$DL/kernel"
(cd "$DL/kernel" && unzip -q "$DL"/sglang_kernel-0.4.4-*.whl \
   -x 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/flashmla_ops.abi3.so' \
 && tar cf - sgl_kernel sglang_kernel-0.4.4.dist-info | nice xz -T2 -6 > "$ROOT/.gpu/sgl_kernel_trim.txz")

# k26ctl's detectors read wordfreq's lists through their own cache (k26ctl/smoke/wordlists.py); the
# wordfreq wheel is 57 MB, the cache of every list the detectors use about 4 MB packed. Carry the cache
# (named for the GPU image's Python) and wordfreq's dist-info (the cache is keyed by its version).
python3 "$HERE/fill_wordlists.py" "$DL/words-cache"
ls "$DL"/wordfreq-3.1.1-*.whl >/dev/null 2>&1 || download -d "$DL" wordfreq==3.1.1
rm -rf "$DL/wordfreq" && mkdir -p "$DL/wordfreq/site"
(cd "$DL/wordfreq/site" && unzip -q "$DL"/wordfreq-3.1.1-*.whl 'wordfreq-3.1.1.dist-info/*')
tar cJf "$ROOT/.gpu/words/wordlists.txz" -C "$DL/words-cache" .
tar cJf "$ROOT/.gpu/words/wordfreq-dist-info.txz" -C "$DL/wordfreq/site" .

cp "$HERE"/flashinfer_stub/*.py "$ROOT/.gpu/stub/flashinfer/"
mkdir -p "$ROOT/.gpu-proj/scripts"
cp -r "$SRC/k26ctl" "$ROOT/.gpu-proj/k26ctl"
cp -r "$HERE" "$ROOT/.gpu-proj/scripts/gpu"
find "$ROOT/.gpu-proj" -name __pycache__ -prune -exec rm -rf {} +
du -sh "$ROOT/.gpu" "$ROOT/.gpu-proj"
du -sh --exclude=.git --exclude=.gpu --exclude=.gpu-proj --exclude=.gpu-models "$ROOT"
