# Shared by scripts/bench.sh and scripts/bench-large.sh (sourced, with ROOT and WORK set).

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
