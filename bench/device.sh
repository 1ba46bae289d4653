#!/usr/bin/env bash
# The GPU node's measurements in one call, within --budget seconds (540 by default: give the
# call a 600 s limit). Run from the repository root, with .device/ prepared beside it (README:
# "The GPU node"):
#
#   bash bench/device.sh                       # every step, in order
#   bash bench/device.sh node-scaling          # only the steps named
#   bash bench/device.sh --stand-in numpy      # a dry run here: numpy for CuPy, tiny sizes
#
# Steps: environment; a smoke run of at most 2 minutes (smoke-probe: import CuPy, a small
# GEMM, the device's name; smoke-tests: a few gpu-marked tests; smoke-sums: one size), then
# the defects only a GPU shows (check-probe, check-first-use, check-local-ids, check-tf32:
# bench/device_checks.py, PASS or FAIL each), the fused and unfused passes against the CPU
# kernels (check-fused: PASS or FAIL with the largest difference), the gpu-marked tests,
# bench/gpu.py sums (the fixed cost of a pack, then 20,000 to 1,000,000 stored rows, fused
# and unfused, beside 16 CPU ranks), bench/node_scaling.py (the digits, both schedules,
# placement by count), bench/cold_calls.py (small calls after the caches were emptied: the
# floor under a pack's serial part) and bench/gpu.py train --rows 1000000. Each step runs under `timeout` within
# what is left of the budget (a step with under 20 s left is skipped); its log is
# $out/<step>.log, and $out/device.json is rewritten after every step, so a step cut off
# loses only itself; $out is a new temporary folder, packed into $OUT/device-results.tgz
# at the end when OUT is set. Never pip install ppack or its
# gpu extra on the node: a second CuPy package breaks `import cupy`.
set -u
stand_in=""; budget=""; data=""; only=()
while [ $# -gt 0 ]; do
    case $1 in
        --stand-in) stand_in=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        --data-dir) data=$2; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        -*) echo "unknown option $1"; exit 2 ;;
        *) only+=("$1"); shift ;;
    esac
done
[ -z "$stand_in" ] || [ "$stand_in" = numpy ] || { echo "--stand-in takes numpy"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd); cd "$root" || exit 1
out=$(mktemp -d "${TMPDIR:-/tmp}/ppack-device-out.XXXXXX")
# the steps' files go to $out; under $OUT (a folder that takes back only a few files) they
# arrive as one archive, device-results.tgz, beside a copy of device.json
finish() {
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT"; tar czf "$OUT/device-results.tgz" -C "$out" . && cp "$out/device.json" "$OUT/"
    fi
    [ -z "$stand_in" ] || rm -rf "$work"
}
trap finish EXIT
data=${data:-$root/.device}
budget=${budget:-$([ -n "$stand_in" ] && echo 600 || echo 540)}
deadline=$((SECONDS + budget))
if [ -n "$stand_in" ]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/ppack-device-work.XXXXXX")
    si=(--stand-in numpy)
else
    work=${TMPDIR:-/tmp}/ppack-device-work; si=()  # kept: a rerun on the same node reuses the 1M rows
fi
mkdir -p "$work"

# the python: the first with numba and mpi4py (and CuPy, off the stand-in) of $PYTHON, the
# checkout's .venv and the python3s on PATH; without CuPy anywhere, the first with the others
# (the probe steps then say why)
candidates=(${PYTHON:-} "$root/.venv/bin/python" $(which -a python3 2>/dev/null))
py=""
first=$([ -n "$stand_in" ] && echo "import numba, mpi4py" || echo "import numba, mpi4py, cupy")
for need in "$first" "import numba, mpi4py"; do
    for c in "${candidates[@]}"; do
        [ -x "$c" ] && "$c" -c "$need" 2>/dev/null && { py=$c; break 2; }
    done
done
[ -n "$py" ] || { echo "no python3 with numba and mpi4py"; exit 1; }
# the launcher of that python's MPI: Open MPI run as root needs --allow-run-as-root, and
# --oversubscribe where the ranks outnumber the cores
mpi=$(dirname "$py")/mpiexec
[ -x "$mpi" ] || mpi=$(command -v mpirun || command -v mpiexec)
if "$mpi" --version 2>&1 | grep -qiE "open mpi|openrte"; then
    launcher="$mpi --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x PATH"
else
    launcher=$mpi
fi
export PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
echo "## python $py; launcher: $launcher; OUT $out; budget ${budget}s${stand_in:+; numpy stand-in (no GPU figure)}"

wanted() {
    [ ${#only[@]} -eq 0 ] && return 0
    local s; for s in "${only[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1
}

summarize() {  # $OUT/device.json from the environment, the steps so far and the checks' verdicts
    "$py" - "$out" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
read = lambda p: json.loads(p.read_text()) if p.exists() else None
steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()] if (out / "steps.jsonl").exists() else []
checks = {c["check"]: {k: c[k] for k in ("defect", "verdict", "reasons", "stand_in")}
          for c in map(read, sorted(out.glob("check_*.json")))}
tests = {}  # pytest's last line: every gpu test skipped is no GPU result
for name in ("smoke-tests", "gpu-tests"):
    log = out / f"{name}.log"
    lines = [l for l in log.read_text().splitlines() if " in " in l and any(
        w in l for w in (" passed", " failed", " skipped", " error"))] if log.exists() else []
    if lines:
        tests[name] = lines[-1].strip("= ")
(out / "device.json").write_text(json.dumps({"environment": read(out / "environment.json"), "steps": steps,
                                             "tests": tests, "checks": checks}, indent=1))
EOF
}

record() {  # record STEP RC SECONDS LIMIT
    printf '{"step": "%s", "rc": "%s", "seconds": %s, "limit": %s}\n' "$1" "$2" "$3" "$4" >> "$out/steps.jsonl"
    summarize
}

step() {  # step NAME LIMIT COMMAND...: under timeout, within the budget left; log in $OUT/NAME.log
    local name=$1 limit=$2; shift 2
    wanted "$name" || return 0
    local left=$((deadline - SECONDS - 5))
    if [ "$left" -lt 20 ]; then
        echo "## $name: skipped, ${left}s of the budget left"; record "$name" skipped 0 0; return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "## $name (limit ${limit}s)"
    local start=$SECONDS rc
    declare -F "$1" > /dev/null && set -- bash -c "$*"  # a function of this script (exported)
    timeout --kill-after=5 "$limit" "$@" > "$out/$name.log" 2>&1; rc=$?
    tail -n 8 "$out/$name.log" | sed 's/^/   /'
    echo "## $name: rc=$rc$([ $rc -eq 124 ] && echo ' (timed out)') in $((SECONDS - start)) s"
    record "$name" "$rc" $((SECONDS - start)) "$limit"
}

environment() {
    { nproc; lscpu 2>/dev/null | grep -E 'Model name|^Socket'
      nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader 2>&1 | head -4
      nvidia-smi 2>&1 | grep -o 'CUDA Version: [0-9.]*' | head -1
      "$mpi" --version 2>&1 | head -1; } > "$out/environment.txt" 2>&1
    "$py" - "$out" "$stand_in" <<'EOF'
import json, platform, sys
from pathlib import Path
facts = {"python": platform.python_version(), "stand_in": sys.argv[2] or None,
         "host": (Path(sys.argv[1]) / "environment.txt").read_text().splitlines()}
for name in ("numpy", "numba", "mpi4py", "cupy", "scipy", "h5py", "pytest"):
    try:
        facts[name] = __import__(name).__version__
    except Exception as exc:  # noqa: BLE001 - what is missing or broken is a fact too
        facts[name] = f"unavailable: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
try:
    from mpi4py import MPI
    facts["mpi_library"] = MPI.Get_library_version().strip().splitlines()[0]
except Exception as exc:  # noqa: BLE001
    facts["mpi_library"] = f"unavailable: {exc}"
try:
    import cupy
    rt = cupy.cuda.runtime
    facts["cuda_runtime"], facts["cuda_driver"] = rt.runtimeGetVersion(), rt.driverGetVersion()
    names = [rt.getDeviceProperties(i)["name"] for i in range(rt.getDeviceCount())]
    facts["gpus"] = [n.decode() if isinstance(n, bytes) else n for n in names]
except Exception as exc:  # noqa: BLE001
    facts["cuda"] = f"unavailable: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
(Path(sys.argv[1]) / "environment.json").write_text(json.dumps(facts, indent=1))
print(json.dumps(facts, indent=1))
EOF
}

probe() {  # import the array module, a small GEMM brought back, the device's name
    "$py" - "$stand_in" <<'EOF'
import sys, time
start = time.perf_counter()
if sys.argv[1]:
    import numpy as xp
    name = "numpy stand-in (no GPU)"
else:
    import cupy as xp
    name = xp.cuda.runtime.getDeviceProperties(xp.cuda.Device().id)["name"]
    name = name.decode() if isinstance(name, bytes) else name
a = xp.arange(64 * 64, dtype=xp.float32).reshape(64, 64) / 4096
value = float((a @ a.T).sum())  # computed on the device, brought back
host = (a.get() if hasattr(a, "get") else a).astype("float64")
expected = float((host @ host.T).sum())
ok = abs(value - expected) <= 1e-4 * abs(expected)
print(f"{'PASS' if ok else 'FAIL'} probe: {name}, a 64 x 64 float32 GEMM gave {value:.6g} (expected {expected:.6g}) "
      f"in {time.perf_counter() - start:.2f} s")
sys.exit(0 if ok else 1)
EOF
}

export -f environment probe
export py out stand_in mpi

if [ -n "$stand_in" ]; then  # tiny sizes: a check of the script, not a measurement
    sums_small=(--stored 2000 --packs 3); sums_all=(--stored 2000 6000 --packs 3 --cpu-ranks 2)
    first_use=(--rows 3000 --packs 20); fused=(--rows 600); train=(--rows 20000 --device cpu --gen-ranks 2)
    scaling=(--rows 3000 --cores 2 --workloads digits --placements count); cold=(--calls 100 --gap-seconds 1)
else
    sums_small=(--stored 20000 --packs 5); sums_all=(--stored 20000 60000 300000 1000000 --packs 10 --cpu-ranks 16)
    first_use=(); fused=(--rows 20000); train=(--rows 1000000 --gen-ranks 16)
    scaling=(--workloads digits --placements count --pipeline on,off); cold=(--calls 600 --gap-seconds 2)
fi
tests=(-m pytest -m gpu -p no:mpi -p no:cacheprovider -q -rs --continue-on-collection-errors)
gpu_py=(bench/gpu.py --launcher "$launcher" --data-dir "$data" --work-dir "$work/gpu" --results-dir "$out")
checks=(bench/device_checks.py --out "$out" "${si[@]}")

step environment 30 environment
step smoke-probe 30 probe  # the smoke run: 2 minutes at most
step smoke-tests 50 "$py" "${tests[@]}" tests/test_kernels_array_compute.py -k "rbf and float32"
step smoke-sums 40 "$py" "${gpu_py[@]}" sums "${si[@]}" "${sums_small[@]}"
step check-probe 60 "$py" "${checks[@]}" probe
step check-first-use 60 "$py" "${checks[@]}" first-use "${first_use[@]}"
step check-local-ids 30 $launcher -n 2 "$py" "${checks[@]}" local-ids
step check-tf32 40 "$py" "${checks[@]}" tf32
step check-fused 60 "$py" "${checks[@]}" fused "${fused[@]}"
step gpu-tests 90 "$py" "${tests[@]}" tests
step sums 120 "$py" "${gpu_py[@]}" sums "${si[@]}" "${sums_all[@]}"
step node-scaling 240 "$py" bench/node_scaling.py --launcher "$launcher" --data-dir "$data" \
    --work-dir "$work/ns" --results-dir "$out" "${scaling[@]}"
step cold-calls 40 "$py" bench/cold_calls.py --out "$out/cold_calls.json" "${cold[@]}"
step train 150 "$py" "${gpu_py[@]}" train "${train[@]}"

echo "## the defects only a GPU shows${stand_in:+ (numpy stand-in: not a GPU result)}:"
for c in probe:1 first-use:2 local-ids:5 tf32:6 fused:passes; do
    name=${c%:*}; number=${c#*:}
    wanted "check-$name" || continue
    verdict=$(grep -hE '^(PASS|FAIL) ' "$out/check-$name.log" 2>/dev/null | tail -1)
    echo "   ${verdict:-FAIL ($number) $name: no verdict (the step was cut off or skipped: $out/check-$name.log)}"
done
for name in smoke-tests gpu-tests; do
    line=$(grep -E " in [0-9.]+s" "$out/$name.log" 2>/dev/null | tail -1)
    [ -n "$line" ] && echo "## $name: $line"
done
echo "## $out/device.json; $((SECONDS)) s in all"
