#!/usr/bin/env bash
# The profiled-cost evidence, stages that run THERE (the GPU machine: torch, no TVM), from exported bundles.
#
#   profile DIR...   profile every bundle (ops alone + whole graphs) into $WORK/cache.json, then
#                    plan every bundle under (a) the profile and (b) leave-one-model-out, 16 at once
#   run LABEL        time every distinct plan of every planned bundle, in turns -> $OUT/LABEL.json
#
# Environment: WORK (where the cache and planned bundles live between stages; default
# .gpu_bundle/work), OUT (where results go), DEVICE (default cuda:0), PROFILE_BUDGET,
# RUN_BUDGET (seconds), ROW_CAP (seconds of timing rounds per row), JOBS.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
WORK=${WORK:-.gpu_bundle/work}
OUT=${OUT:-$WORK}
DEVICE=${DEVICE:-cuda:0}
PY=${PY:-python3}
mkdir -p "$WORK" "$OUT"
stage=$1; shift
case $stage in
  profile)
    $PY bench/gpu/profile_bundles.py --bundles "$@" --device "$DEVICE" --cache "$WORK/cache.json" \
      --log "$WORK/profile_log.json" --budget "${PROFILE_BUDGET:-300}" --repeats 5 --batch-s 0.003
    $PY bench/gpu/replan_profiled.py --cache "$WORK/cache.json" --bundles "$@" \
      --out "$WORK/planned" --variants 8 --protocols profiled lomo --jobs "${JOBS:-16}"
    cp "$WORK/cache.json" "$WORK/profile_log.json" "$OUT/" 2>/dev/null || true
    tar -czf "$OUT/planned.tar.gz" -C "$WORK" planned
    ;;
  run)
    label=$1
    [ -d "$WORK/planned" ] || tar -xzf "$WORK/planned.tar.gz" -C "$WORK"
    $PY bench/gpu/profiled_evidence.py --bundles "$WORK"/planned/*/ --device "${DEVICE%%:*}" \
      --out "$OUT/$label.json" --budget "${RUN_BUDGET:-500}" --row-cap "${ROW_CAP:-4}" \
      --max-rounds 40 --label "$label" --tf32 default
    ;;
  *) echo "usage: $0 profile DIR... | run LABEL" >&2; exit 2 ;;
esac
