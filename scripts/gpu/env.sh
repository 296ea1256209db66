# `source .gpu-proj/scripts/gpu/env.sh` on the GPU machine, in the checkout root (what build.sh wrote
# travels with it). Unpacks the carried packages into /tmp (kept while the machine stays up), then sets
# the paths and the variables real SGLang needs there. Safe to source again.
if [ ! -d /tmp/k26-site/sglang ]; then
  mkdir -p /tmp/k26-site
  tar xJf .gpu/site.txz -C /tmp/k26-site                           # installed by build.sh for Python 3.12
  tar xJf .gpu/sgl_kernel_trim.txz -C /tmp/k26-site
  mkdir -p /tmp/k26-stub/flashinfer /tmp/k26-words
  cp .gpu/stub/flashinfer/*.py /tmp/k26-stub/flashinfer/
  tar xJf .gpu/words/wordlists.txz -C /tmp/k26-words               # k26ctl's word-list cache
  tar xJf .gpu/words/wordfreq-dist-info.txz -C /tmp/k26-site        # its version, which keys the cache
fi
# this checkout's k26ctl first, then what was carried, then the image's own packages (torch, triton)
# without .gpu-proj (the checkout itself travelled, as the device tool copies it), the checkout's own tree
K26_PROJ=$PWD/.gpu-proj; [ -d "$K26_PROJ/k26ctl" ] || K26_PROJ=$PWD
export PYTHONPATH=$K26_PROJ:/tmp/k26-site:/tmp/k26-stub${PYTHONPATH:+:$PYTHONPATH}
# host_env.sh unpacks k26ctl's client packages (paramiko, ...) here: last, so nothing above is shadowed
export PYTHONPATH=$PYTHONPATH:/tmp/k26-client-site
export PATH=/tmp/k26-site/bin:$PATH
export XDG_CACHE_HOME=/tmp/k26-words XDG_STATE_HOME=/tmp/k26-state
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 SGLANG_IS_FLASHINFER_AVAILABLE=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
