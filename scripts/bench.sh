#!/usr/bin/env bash
# Benchmark: protospread's fetch + score + aggregate against a DuckDB SQL script computing the
# same per-cell table from the same stored-answer file. Usage: scripts/bench.sh N [SEED]
# (N item answers, rounded up to whole models of 2,184). Prints wall time and peak RSS of each
# and the ratio, and checks that the two per-cell tables agree. A benchmark, not a test;
# docs/performance.md has the measured table.
set -euo pipefail

N=${1:?usage: scripts/bench.sh N [SEED]}
SEED=${2:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/target/release/protospread"
VENV="$ROOT/target/bench-venv"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/protospread-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

if [ ! -x /usr/bin/time ]; then
    echo "installing GNU time (Debian package 'time') for peak RSS" >&2
    if [ "$(id -u)" = 0 ]; then apt-get install -y -q time >/dev/null; else sudo apt-get install -y -q time >/dev/null; fi
fi
# The peer's version is pinned so that ratios measured on different days compare against the
# same DuckDB; a venv holding another version is brought to this one.
DUCKDB=2.0.1
# shellcheck source=scripts/pinned-venv.sh
. "$ROOT/scripts/pinned-venv.sh"
pinned_venv "$VENV" duckdb "$DUCKDB"
echo "DuckDB $DUCKDB (PyPI), venv $VENV"
(cd "$ROOT" && cargo build --release -q -j 2)

ANSWERS="$WORK/bulk_answers.parquet"
"$BIN" simulate --answers "$N" --parquet "$ANSWERS" --seed "$SEED"
SHA=$(sha256sum "$ANSWERS" | cut -d' ' -f1)
ls -l "$ANSWERS" | awk '{printf "stored-answer file: %.1f MB\n", $5 / 1e6}'

# The repository's configuration with absolute data paths, its stored-answer inputs and sweep
# replaced by the bulk file (human inputs, scoring key and [aggregate] unchanged), and only the
# work the DuckDB script does too: the study's strict reply rule, no secondary analysis (the
# side-by-side tables under the lenient rule and the single-item set are not benchmarked).
sed -e "s#\"data/#\"$ROOT/data/#g" -e '/^# --- SIMULATED stored answers/,$d' \
    -e 's/^reply_rules = .*/reply_rules = ["strict"]/' \
    "$ROOT/pipeline.toml" > "$WORK/pipeline.toml"
cat >> "$WORK/pipeline.toml" <<TOML

[aggregate]
secondary_protocol_conditions = []

[[inputs]]
name = "bulk_answers"
role = "answers"
label = "bulk"
path = "$ANSWERS"
sha256 = "$SHA"
TOML

measure() { # name, then the command; appends "name wall_s rss_kb" to $WORK/times
    local name=$1; shift
    /usr/bin/time -v -o "$WORK/$name.time" "$@" >"$WORK/$name.log" 2>&1 || {
        cat "$WORK/$name.log" >&2; echo "$name failed" >&2; exit 1; }
    local wall rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
        for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$WORK/$name.time")
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/$name.time")
    echo "$name $wall $rss" >> "$WORK/times"
}

P=("$BIN" --quiet --config "$WORK/pipeline.toml" --out "$WORK/out")
measure fetch "${P[@]}" fetch
measure score "${P[@]}" score
measure aggregate "${P[@]}" aggregate
measure duckdb "$VENV/bin/python" "$ROOT/scripts/bench/run_duckdb.py" "$ANSWERS" \
    "$ROOT/data/scoring_key.csv" "$WORK/out/score/norms.parquet" "$WORK/duckdb_cells.parquet"

echo "per-cell tables (kept cells with both SDs):"
"$VENV/bin/python" "$ROOT/scripts/bench/compare.py" "$WORK/out/aggregate/cells.parquet" \
    "$WORK/duckdb_cells.parquet"

awk -v n="$N" '
    { wall[$1] = $2; rss[$1] = $3 }
    END {
        pw = wall["fetch"] + wall["score"] + wall["aggregate"]
        pr = rss["fetch"]; if (rss["score"] > pr) pr = rss["score"]; if (rss["aggregate"] > pr) pr = rss["aggregate"]
        printf "%-34s %10s %14s\n", "N = " n " item answers", "wall (s)", "peak RSS (MB)"
        for (s in wall) if (s != "duckdb") printf "  protospread %-22s %10.2f %14.1f\n", s, wall[s], rss[s] / 1024
        printf "%-34s %10.2f %14.1f\n", "protospread fetch+score+aggregate", pw, pr / 1024
        printf "%-34s %10.2f %14.1f\n", "duckdb", wall["duckdb"], rss["duckdb"] / 1024
        printf "%-34s %10.2f %14.2f\n", "ratio protospread / duckdb", pw / wall["duckdb"], pr / rss["duckdb"]
    }' "$WORK/times"
