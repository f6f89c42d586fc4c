#!/usr/bin/env bash
# Run the default tier several times in a row from a fresh clone, with a CPU hog beside it, and
# print each run's time and result: the suite's reliability under load, as a newcomer meets it.
#
#   scripts/soak-tests.sh [RUNS] [HOGS] [REVISION]
#
# RUNS (default 3) runs of `pytest` (the default tier, as pyproject's addopts set it), each
# one in the same fresh clone of this repository at REVISION (default HEAD; committed work
# only), beside HOGS (default 1) processes that spin on the CPU for the whole time. The
# environment is passed on: set HARNESS_STORE_PG_URL for the PostgreSQL half, HARNESS_SHARED
# for the shared folder (default: the `shared` folder beside this checkout, as the suite's own
# default). Each run's log is kept in the clone's folder, which is printed. Exits non-zero when
# any run failed. SOAK_PYTEST_ARGS, when set, is passed to pytest (say, a few files to try the
# script on).
set -euo pipefail

runs=${1:-3}
hogs=${2:-1}
revision=${3:-HEAD}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export HARNESS_SHARED=${HARNESS_SHARED:-$(dirname "$here")/shared}

work=$(mktemp -d "${TMPDIR:-/tmp}/harness-store-soak.XXXXXX")
echo "fresh clone of $(git -C "$here" rev-parse --short "$revision") in $work/repo"
git clone --quiet --no-local "$here" "$work/repo"
git -C "$work/repo" checkout --quiet --detach "$(git -C "$here" rev-parse "$revision")"
python3 -m venv "$work/repo/.venv"
"$work/repo/.venv/bin/pip" install --quiet -e "$work/repo[test]" 2>"$work/pip.log" || {
    cat "$work/pip.log" >&2
    exit 1
}

pids=()
stop_hogs() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
}
trap stop_hogs EXIT
for _ in $(seq "$hogs"); do
    python3 -c "while True: pass" &
    pids+=($!)
done
echo "$hogs CPU hog(s) running beside the suite"

failed=0
for run in $(seq "$runs"); do
    log="$work/run-$run.log"
    start=$(date +%s)
    if (cd "$work/repo" && .venv/bin/pytest ${SOAK_PYTEST_ARGS:-} >"$log" 2>&1); then result=passed; else
        result=FAILED
        failed=1
    fi
    seconds=$(($(date +%s) - start))
    summary=$(grep -E '^=+ .*(passed|failed|error).* in ' "$log" | tail -1 | tr -d '=' | xargs)
    echo "run $run: $result in ${seconds}s ($summary); log $log"
done
exit "$failed"
