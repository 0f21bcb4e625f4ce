#!/usr/bin/env bash
# `pip install .` of the source tree into a fresh virtual environment, then the
# five lines of docs/PYTHON.md ("decode and validate a vLLM cache") in it.
#   pip_install_fresh_venv.sh SOURCE_DIR WORK_DIR [PYTHON]
# Build isolation fetches scikit-build-core and nanobind from PyPI, as on a user's
# machine. TQ_PIP_OFFLINE=1 (a machine without PyPI) makes the venv see the
# system's packages and builds without isolation; TQ_PIP_CUDA=ON builds the CUDA
# backend too (off by default: CI has nvcc but no GPU, and the CUDA build is the
# longest part) and, where the venv sees torch and a CUDA device, decodes the same
# case from torch CUDA tensors with the installed package and validates it.
set -euo pipefail
src=$1
work=$2
python=${3:-python3}
rm -rf "$work"
mkdir -p "$work"
venv_args=()
pip_args=(-q)
if [ -n "${TQ_PIP_OFFLINE:-}" ]; then
  venv_args+=(--system-site-packages)
  pip_args+=(--no-build-isolation --no-index)
fi
"$python" -m venv "${venv_args[@]}" "$work/venv"
if [ -n "${TQ_PIP_OFFLINE:-}" ]; then
  # When $python is itself a virtual environment (the GPU machine's torch venv),
  # --system-site-packages reaches only the base interpreter's packages: add the
  # parent environment's too (scikit-build-core, nanobind, numpy, torch).
  parent=$("$python" -c 'import site; print(site.getsitepackages()[0])')
  child=$("$work/venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  echo "$parent" > "$child/_parent_env.pth"
fi
start=$SECONDS
"$work/venv/bin/pip" install "${pip_args[@]}" "$src" \
  -C "cmake.define.TURBOQUANT_ENABLE_CUDA=${TQ_PIP_CUDA:-OFF}" -C "build-dir=$work/build"
echo "pip install: $((SECONDS - start)) s"
case_dir=$src/tests/data/vllm-aos/a01_4bit_nc_d128_bs16_gqa4
cd "$work"  # not the source tree: the installed package must be the one imported
"$work/venv/bin/python" - "$case_dir" <<'PY'
import sys
import turboquant as tq
case = tq.load_case(sys.argv[1])
out = case.decode()
print(case.validate(case.expected_out))
assert case.validate(case.expected_out).ok and case.validate(out).ok
print("installed at", tq.__file__)
assert "/venv/" in tq.__file__, tq.__file__
PY
if [ "${TQ_PIP_CUDA:-OFF}" = ON ]; then
  "$work/venv/bin/python" - "$case_dir" <<'PY'
import sys
import turboquant as tq
if not tq.cuda_built():
    sys.exit("TQ_PIP_CUDA=ON, but the installed package has no CUDA backend")
try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available():
    print("CUDA backend installed; no torch CUDA device here: the CUDA decode is skipped")
    sys.exit(0)
case = tq.load_case(sys.argv[1])
args = [torch.from_numpy(a).cuda() for a in (case.query, case.kv_cache, case.block_table, case.seq_lens)]
out = tq.decode(*args, case.layout, scale=case.scale, num_splits=case.num_splits)
torch.cuda.synchronize()
assert out.is_cuda, out.device
report = case.validate(out.cpu().numpy())
print(report)
assert report.ok
print("CUDA decode of torch tensors on", torch.cuda.get_device_name(), "with the installed package: PASS")
PY
fi
