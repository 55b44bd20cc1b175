#!/usr/bin/env bash
# The large-scale check: `protospread run` at the default settings on one stored-answer file
# that DuckDB wrote in a parallel export's order, against the DuckDB script on the same file.
# Usage: scripts/bench-large.sh N [SEED] (N item answers, rounded up to whole models). It writes
# the file a piece at a time (write_answers.py --chunked: the same rows, in the same order, as
# scripts/bench.sh's export-order file), then prints the wall time and peak RSS of `run` and of
# the DuckDB script, the ratio, the largest output folders and whether the per-cell tables
# agree. With BENCH_ANSWERS_DIR set, the file is kept in (and on a later call with the same N
# and SEED, read from) that folder. A benchmark, not a test: run it on an otherwise idle
# machine with room on disk (about 20 GB at 10^9 answers). docs/performance.md has the figures.
set -euo pipefail

N=${1:?usage: scripts/bench-large.sh N [SEED]}
SEED=${2:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/target/release/protospread"
VENV="$ROOT/target/bench-venv"
PY="$VENV/bin/python"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/protospread-bench-large.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=scripts/bench/common.sh
. "$ROOT/scripts/bench/common.sh"
prepare

DIR=${BENCH_ANSWERS_DIR:-$WORK/answers}
mkdir -p "$DIR"
answers="$DIR/export.parquet"
stamp="$DIR/export.$N.$SEED"
if [ -f "$answers" ] && [ -f "$stamp" ]; then
    echo "reading the file written before: $answers"
    cat "$stamp"
else
    rm -f "$answers" "$DIR"/export.*.*
    "$PY" "$ROOT/scripts/bench/write_answers.py" "$N" "$SEED" "$DIR" export --chunked \
        | grep -v '^  piece' | tee "$WORK/written"
    mv "$WORK/written" "$stamp"
fi

mkdir -p "$WORK/norms"
config "$WORK/norms/pipeline.toml"
"$BIN" --quiet --config "$WORK/norms/pipeline.toml" --out "$WORK/norms/out" fetch
"$BIN" --quiet --config "$WORK/norms/pipeline.toml" --out "$WORK/norms/out" score
NORMS="$WORK/norms/out/score/norms.parquet"

config "$WORK/pipeline.toml" "$answers"
echo "== export: running" >&2
measure run "$BIN" --quiet --config "$WORK/pipeline.toml" --out "$WORK/out" run || true
(cd "$WORK/out" 2>/dev/null && du -sh -- *) | sed "s/^/  output /" > "$WORK/sizes" || true
[ ! -f "$WORK/out/report/report.html" ] ||
    echo "  report.html $(stat -c %s "$WORK/out/report/report.html") bytes" >> "$WORK/sizes"
# Only cells.parquet is compared: the rest goes before DuckDB runs, to leave it the disk.
if [ -f "$WORK/out/aggregate/cells.parquet" ]; then
    mv "$WORK/out/aggregate/cells.parquet" "$WORK/cells.parquet"
fi
rm -rf "$WORK/out"
measure duckdb "$PY" "$ROOT/scripts/bench/run_duckdb.py" "$answers" \
    "$ROOT/data/scoring_key.csv" "$NORMS" "$WORK/duckdb_cells.parquet" "$WORK/duckdb.tmp" || true
if [ -f "$WORK/cells.parquet" ] && [ -f "$WORK/duckdb_cells.parquet" ]; then
    "$PY" "$ROOT/scripts/bench/compare.py" "$WORK/cells.parquet" "$WORK/duckdb_cells.parquet" \
        > "$WORK/compare.txt" || true
else
    echo "per-cell tables not compared (a step failed)" > "$WORK/compare.txt"
fi

echo
echo "Summary, N = $N requested, seed $SEED, protospread $COMMIT, DuckDB $DUCKDB, export order:"
awk '{ printf "  %-8s %10.2f s %10.1f MB%s\n", $1, $2, $3 / 1024, $4 == "ok" ? "" : "   FAILED"
       w[$1] = $2; st[$1] = $4 }
     END { if (st["run"] == "ok" && st["duckdb"] == "ok")
             printf "  ratio run / DuckDB %.2f\n", w["run"] / w["duckdb"] }' "$WORK/times"
cat "$WORK/sizes"
sed 's/^/  /' "$WORK/compare.txt"
