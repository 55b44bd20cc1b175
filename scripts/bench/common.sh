# Shared by scripts/bench.sh and scripts/bench-large.sh (sourced, with ROOT, VENV and WORK set).

# prepare: installs GNU time (peak RSS) and the pinned DuckDB, builds protospread, sets COMMIT and
# DUCKDB and prints what runs on which machine.
prepare() {
    if [ ! -x /usr/bin/time ]; then
        echo "installing GNU time (Debian package 'time') for peak RSS" >&2
        if [ "$(id -u)" = 0 ]; then apt-get install -y -q time >/dev/null; else sudo apt-get install -y -q time >/dev/null; fi
    fi
    # The peer's version is pinned so that ratios measured on different days compare against the
    # same DuckDB, and so that the generated files (DuckDB's hash) are the same bytes.
    DUCKDB=2.0.1
    # shellcheck source=scripts/pinned-venv.sh
    . "$ROOT/scripts/pinned-venv.sh"
    pinned_venv "$VENV" duckdb "$DUCKDB"
    (cd "$ROOT" && cargo build --release --locked -q -j 2)
    COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
    git -C "$ROOT" diff --quiet HEAD -- crates src Cargo.toml Cargo.lock || COMMIT="$COMMIT+changes"
    echo "protospread $COMMIT (release), DuckDB $DUCKDB (PyPI, $VENV), $(nproc) cores," \
        "$(awk '/MemTotal/ {printf "%.1f GB", $2 / 1048576}' /proc/meminfo)," \
        "load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# The repository's configuration with absolute data paths and its stored-answer inputs and
# sweep left out (human inputs, scoring key and [aggregate] unchanged), and only the work the
# DuckDB script does too: the study's strict reply rule, no secondary analysis. config FILE
# [ANSWERS] writes it, with ANSWERS as the one stored-answer input when given.
config() {
    sed -e "s#\"data/#\"$ROOT/data/#g" -e '/^# --- SIMULATED stored answers/,$d' \
        -e 's/^reply_rules = .*/reply_rules = ["strict"]/' "$ROOT/pipeline.toml" > "$1"
    printf '\n[aggregate]\nsecondary_protocol_conditions = []\n' >> "$1"
    [ $# -lt 2 ] || printf '\n[[inputs]]\nname = "bench_answers"\nrole = "answers"\nlabel = "bench"\npath = "%s"\nsha256 = "%s"\n' \
        "$2" "$(sha256sum "$2" | cut -d' ' -f1)" >> "$1"
}

# measure NAME COMMAND...: runs COMMAND under GNU time; appends "NAME wall_s rss_kb status" to
# $WORK/times and, when it fails, shows the end of its output; returns its status.
measure() {
    local name=$1; shift
    local status=ok
    /usr/bin/time -v -o "$WORK/$name.time" "$@" >"$WORK/$name.log" 2>&1 || status=failed
    local wall rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
        for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$WORK/$name.time")
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/$name.time")
    echo "$name $wall $rss $status" >> "$WORK/times"
    if [ "$status" != ok ]; then
        echo "$name FAILED after $wall s (peak RSS $((rss / 1024)) MB):" >&2
        tail -5 "$WORK/$name.log" | sed 's/^/    /' >&2
        return 1
    fi
}
