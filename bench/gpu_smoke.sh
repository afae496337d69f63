#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and driver: run the `gpu` tests, then the real pipeline
# (NVML agent -> HTTP -> server -> /metrics) while torch keeps the GPU busy, and keep what was seen.
# Usage: bash bench/gpu_smoke.sh [WHEEL_DIR]   (WHEEL_DIR: wheels to install from when offline)
set -euo pipefail
OUT=${OUT:-$(mktemp -d)}
WHEELS=${1:-}
# Installs into python3's own environment (on a GPU image, the one that has torch and pytest);
# GPUWATCH_SKIP_INSTALL=1 when this checkout is already installed there (pip install -e .).
PY=python3
if [ "${GPUWATCH_SKIP_INSTALL:-0}" = 1 ]; then
  :
elif [ -n "$WHEELS" ]; then
  "$PY" -m pip install -q --no-index --find-links "$WHEELS" --no-build-isolation -e .
else
  "$PY" -m pip install -q -e .
fi
get() { "$PY" -c 'import httpx, sys; print(httpx.get(sys.argv[1], timeout=5).text)' "$1"; }

nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,power.draw,temperature.gpu,clocks.sm \
  --format=csv | tee "$OUT/nvidia-smi.csv"
"$PY" -m pytest -p no:cacheprovider -m gpu -s -q \
  tests/agent/test_nvml_collector.py tests/gpuwatch/client/test_async_checkpoint.py tests/gpuwatch/client/test_client_cuda.py 2>&1 \
  | tee "$OUT/pytest-gpu.txt" || tests_rc=$?  # the pipeline below runs even when a test failed

data=$(mktemp -d)
export GPUWATCH_DATA_DIR=$data GPUWATCH_DATABASE_URL=
"$PY" -m gpuwatch db upgrade
token=$("$PY" -m gpuwatch token create --node gpu-node)
"$PY" -m gpuwatch server --port 8611 >"$OUT/server.log" 2>&1 &
server=$!
for _ in $(seq 150); do get http://127.0.0.1:8611/readyz 2>/dev/null | grep -q ready && break; sleep 0.2; done
"$PY" -m gpuwatch agent --server http://127.0.0.1:8611 --token "$token" --node gpu-node --flush 1 \
  >"$OUT/agent.log" 2>&1 &
agent=$!
# A bf16 matmul load for 20 s; the snapshot is taken in the middle of it.
"$PY" - <<'PYEOF' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn_like(a)
end = time.time() + 20
while time.time() < end:
    a @ b
    torch.cuda.synchronize()
PYEOF
load=$!
sleep 12
get http://127.0.0.1:8611/metrics >"$OUT/metrics.txt"
get http://127.0.0.1:8611/api/v1/gpus >"$OUT/gpus.json"
wait "$load"
kill -TERM "$agent"; wait "$agent" || true
kill -TERM "$server"; wait "$server" || true
grep -E '^(DCGM_FI_DEV_(GPU_UTIL|FB_USED|POWER_USAGE|GPU_TEMP|SM_CLOCK|XID_ERRORS|ECC_DBE_VOL_TOTAL)|gpuwatch_node_up)' \
  "$OUT/metrics.txt" | tee "$OUT/summary.txt"
exit "${tests_rc:-0}"
