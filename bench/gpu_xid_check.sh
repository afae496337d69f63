#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, as root: make the GPU raise real application Xids (13, 31, 43: a Triton
# kernel's out-of-bounds store, then a device-side assert) while the agent reads NVML's Xid events and
# /dev/kmsg, and keep what the server made of them: the Xid counters, the stored events, the incidents.
# Application Xids must be counted and must open no `xid` incident (they are not the node's fault).
# Usage: OUT=DIR bash bench/gpu_xid_check.sh   (this checkout installed in python3's environment)
set -euo pipefail
OUT=${OUT:?OUT: where to keep what was seen}
mkdir -p "$OUT"
PY=python3
get() { "$PY" -c 'import httpx, sys; print(httpx.get(sys.argv[1], timeout=5).text)' "$1"; }
data=$(mktemp -d)
export GPUWATCH_DATA_DIR=$data GPUWATCH_DATABASE_URL=
"$PY" -m gpuwatch db upgrade >/dev/null 2>&1
token=$("$PY" -m gpuwatch token create --node gpu-node)
"$PY" -m gpuwatch server --port 8612 >"$OUT/server.log" 2>&1 &
server=$!
for _ in $(seq 150); do get http://127.0.0.1:8612/readyz 2>/dev/null | grep -q ready && break; sleep 0.2; done
"$PY" -m gpuwatch agent --server http://127.0.0.1:8612 --token "$token" --node gpu-node --flush 1 \
  --kernel-log /dev/kmsg >"$OUT/agent.log" 2>&1 &
agent=$!
for _ in $(seq 100); do get http://127.0.0.1:8612/metrics | grep -q '^gpuwatch_node_up.* 1.0' && break; sleep 0.2; done
"$PY" bench/gpu_failures.py "$OUT/failures" --only triton-kernel-illegal-address embedding-device-side-assert
for _ in $(seq 100); do
  get http://127.0.0.1:8612/metrics | grep -q 'gpuwatch_xid_events_total{.*xid="43"' && break
  sleep 0.2
done
sleep 3  # what arrives after the last Xid (a second report of the same one) is what this looks for
get http://127.0.0.1:8612/metrics | grep -iE 'xid|incident' | grep -v '^#' >"$OUT/metrics-xid.txt" || true
get 'http://127.0.0.1:8612/api/v1/events?limit=50' >"$OUT/events.json"
get http://127.0.0.1:8612/api/v1/incidents >"$OUT/incidents.json"
dmesg -T | grep NVRM | tail -20 >"$OUT/dmesg.txt" || true
kill -TERM "$agent" 2>/dev/null || true; wait "$agent" || true
kill -TERM "$server" 2>/dev/null || true; wait "$server" || true
cat "$OUT/metrics-xid.txt"
