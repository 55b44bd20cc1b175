#!/usr/bin/env bash
# Benchmark: protospread against a DuckDB SQL script computing the same per-cell table from the
# same stored-answer file, a file DuckDB wrote (scripts/bench/answers.sql) in three row orders.
# Usage: scripts/bench.sh N [SEED] (N item answers, rounded up to whole models). Per order it
# prints the wall time and peak RSS of protospread's fetch, score, aggregate, report and `run`
# and of the DuckDB script, the ratio (fetch + score + aggregate) / DuckDB, and whether the two
# per-cell tables agree, then the I/O floor (DuckDB copying the stored answers and protospread's
# parsed answers); a failing stage is reported and the next order runs. A benchmark, not
# a test: run it on an otherwise idle machine. docs/performance.md has the method and the table.
set -euo pipefail

N=${1:?usage: scripts/bench.sh N [SEED]}
SEED=${2:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/target/release/protospread"
VENV="$ROOT/target/bench-venv"
PY="$VENV/bin/python"
ORDERS=(sorted export shuffled)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/protospread-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=scripts/bench/common.sh
. "$ROOT/scripts/bench/common.sh"
prepare

mkdir -p "$WORK/answers"
"$PY" "$ROOT/scripts/bench/write_answers.py" "$N" "$SEED" "$WORK/answers"

# The human norms (docs/norms.md) do not depend on the answers: the score stage of a study
# without answers writes them once for the DuckDB script.
mkdir -p "$WORK/norms"
config "$WORK/norms/pipeline.toml"
"$BIN" --quiet --config "$WORK/norms/pipeline.toml" --out "$WORK/norms/out" fetch
"$BIN" --quiet --config "$WORK/norms/pipeline.toml" --out "$WORK/norms/out" score
NORMS="$WORK/norms/out/score/norms.parquet"

for order in "${ORDERS[@]}"; do
    answers="$WORK/answers/$order.parquet"
    dir="$WORK/$order"
    mkdir -p "$dir"
    config "$dir/pipeline.toml" "$answers"
    P=("$BIN" --quiet --config "$dir/pipeline.toml")
    echo "== $order: running" >&2
    stages_ok=1
    for stage in fetch score aggregate report; do
        measure "$order.$stage" "${P[@]}" --out "$dir/out" "$stage" || { stages_ok=0; break; }
    done
    # `run` in a fresh folder: all four stages in one process, as a user runs them.
    [ "$stages_ok" = 0 ] || measure "$order.run" "${P[@]}" --out "$dir/run" run || true
    rm -rf "$dir/run"
    measure "$order.duckdb" "$PY" "$ROOT/scripts/bench/run_duckdb.py" "$answers" \
        "$ROOT/data/scoring_key.csv" "$NORMS" "$dir/duckdb_cells.parquet" || true
    if [ -f "$dir/out/aggregate/cells.parquet" ] && [ -f "$dir/duckdb_cells.parquet" ]; then
        "$PY" "$ROOT/scripts/bench/compare.py" "$dir/out/aggregate/cells.parquet" \
            "$dir/duckdb_cells.parquet" > "$dir/compare.txt" || true
    else
        echo "per-cell tables not compared (a step failed)" > "$dir/compare.txt"
    fi
    # What the inference tables add to the aggregate stage: the stage with and without them
    # (the benchmark-only flag --without-inference), alternated, three times each.
    if [ "$stages_ok" = 1 ]; then
        for round in 1 2 3; do
            measure "$order.with_inference_$round" "${P[@]}" --out "$dir/out" aggregate || true
            measure "$order.without_inference_$round" "${P[@]}" --out "$dir/out" aggregate \
                --without-inference || true
        done
    fi
    # The I/O floor: DuckDB copying the stored answers and protospread's parsed answers, two
    # tables the stages must read and write whatever else they do (docs/performance.md).
    if [ -f "$dir/out/score/parsed_answers.parquet" ]; then
        measure "$order.copy_answers" "$PY" "$ROOT/scripts/bench/copy_duckdb.py" "$answers" \
            "$dir/copy.parquet" || true
        rm -f "$dir/copy.parquet"
        measure "$order.copy_parsed" "$PY" "$ROOT/scripts/bench/copy_duckdb.py" \
            "$dir/out/score/parsed_answers.parquet" "$dir/copy.parquet" || true
        rm -f "$dir/copy.parquet"
    fi
    rm -rf "$dir/out"
done

# The results: one block per order, then one summary line per order.
for order in "${ORDERS[@]}"; do
    mb=$(stat -c %s "$WORK/answers/$order.parquet" | awk '{printf "%.1f", $1 / 1e6}')
    echo
    echo "== $order ($mb MB)"
    awk -v o="$order" '
        { split($1, k, "."); if (k[1] != o) next; s = k[2]; wall[s] = $2; rss[s] = $3; st[s] = $4 }
        function line(label, s) {
            if (!(s in wall)) printf "  %-36s %10s\n", label, "not run"
            else printf "  %-36s %10.2f %14.1f%s\n", label, wall[s], rss[s] / 1024,
                st[s] == "ok" ? "" : "   FAILED"
        }
        END {
            printf "  %-36s %10s %14s\n", "step", "wall (s)", "peak RSS (MB)"
            line("protospread fetch", "fetch"); line("protospread score", "score")
            line("protospread aggregate", "aggregate")
            ok = st["fetch"] == "ok" && st["score"] == "ok" && st["aggregate"] == "ok"
            pw = wall["fetch"] + wall["score"] + wall["aggregate"]
            pr = rss["fetch"]; if (rss["score"] > pr) pr = rss["score"]
            if (rss["aggregate"] > pr) pr = rss["aggregate"]
            if (ok) printf "  %-36s %10.2f %14.1f\n", "protospread fetch+score+aggregate", pw, pr / 1024
            line("protospread report", "report"); line("protospread run (all four stages)", "run")
            line("DuckDB script", "duckdb")
            if (ok && st["duckdb"] == "ok")
                printf "  %-36s %10.2f\n", "ratio (fetch+score+aggregate)/DuckDB", pw / wall["duckdb"]
        }' "$WORK/times"
    sed 's/^/  /' "$WORK/$order/compare.txt"
done

echo
echo "Summary, N = $N requested, seed $SEED, protospread $COMMIT, DuckDB $DUCKDB (times in s, RSS in MB):"
echo
echo "| order | fetch | score | aggregate | f+s+a | report | run | DuckDB | ratio | peak RSS f+s+a | RSS run | RSS DuckDB | per-cell tables |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for order in "${ORDERS[@]}"; do
    agree=$(grep -q '^per-cell tables agree' "$WORK/$order/compare.txt" && \
        awk -F': ' '/^  cells:/ {c = $2} /^  exact_ties:/ {t = $2} END {printf "agree (%d cells, %d exact ties)", c, t}' \
            "$WORK/$order/compare.txt" || echo "**$(tail -1 "$WORK/$order/compare.txt")**")
    awk -v o="$order" -v agree="$agree" '
        { split($1, k, "."); if (k[1] != o) next; s = k[2]; wall[s] = $2; rss[s] = $3; st[s] = $4; seen[s] = 1 }
        function t(s) { return !(s in seen) ? "-" : st[s] == "ok" ? sprintf("%.2f", wall[s]) : "**failed**" }
        function m(s) { return !(s in seen) ? "-" : sprintf("%.0f", rss[s] / 1024) }
        END {
            ok = st["fetch"] == "ok" && st["score"] == "ok" && st["aggregate"] == "ok"
            pw = wall["fetch"] + wall["score"] + wall["aggregate"]
            pr = rss["fetch"]; if (rss["score"] > pr) pr = rss["score"]
            if (rss["aggregate"] > pr) pr = rss["aggregate"]
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", o,
                t("fetch"), t("score"), t("aggregate"), ok ? sprintf("%.2f", pw) : "-",
                t("report"), t("run"), t("duckdb"),
                ok && st["duckdb"] == "ok" ? sprintf("%.2f", pw / wall["duckdb"]) : "-",
                sprintf("%.0f", pr / 1024), m("run"), m("duckdb"), agree
        }' "$WORK/times"
done

echo
echo "The inference tables' share of the aggregate stage (median of three alternated runs each):"
echo
echo "| order | aggregate (s) | without the inference tables (s) | added |"
echo "|---|---:|---:|---:|"
for order in "${ORDERS[@]}"; do
    awk -v o="$order" '
        function median(a, n,   i, j, t) {
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return a[int((n + 1) / 2)]
        }
        { split($1, k, "."); if (k[1] != o || $4 != "ok") next
          if (k[2] ~ /^with_inference_/) w[++nw] = $2
          if (k[2] ~ /^without_inference_/) wo[++nwo] = $2 }
        END {
            if (nw == 3 && nwo == 3) {
                a = median(w, 3); b = median(wo, 3)
                printf "| %s | %.2f | %.2f | %+.1f%% |\n", o, a, b, 100 * (a - b) / b
            } else printf "| %s | - | - | not measured |\n", o
        }' "$WORK/times"
done

echo
echo "The I/O floor: DuckDB copying the stored-answer file and protospread's parsed_answers.parquet"
echo "(read and write again, nothing else), against the DuckDB script:"
echo
echo "| order | DuckDB script | copy stored answers | copy parsed_answers | both copies | both / script |"
echo "|---|---:|---:|---:|---:|---:|"
for order in "${ORDERS[@]}"; do
    awk -v o="$order" '
        { split($1, k, "."); if (k[1] != o) next; wall[k[2]] = $2; st[k[2]] = $4 }
        END {
            ok = st["duckdb"] == "ok" && st["copy_answers"] == "ok" && st["copy_parsed"] == "ok"
            if (!ok) { printf "| %s | - | - | - | - | not measured |\n", o; exit }
            c = wall["copy_answers"] + wall["copy_parsed"]
            printf "| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", o, wall["duckdb"],
                wall["copy_answers"], wall["copy_parsed"], c, c / wall["duckdb"]
        }' "$WORK/times"
done
