"""Write the benchmark's stored-answer file in the given row orders, with DuckDB.

python3 write_answers.py N SEED DIR [ORDER ...]: runs scripts/bench/answers.sql for the fewest
models whose item answers reach N (13 models in 16 answer 2,184 items, the 3 without ST1 answer
1,680), then writes DIR/<order>.parquet for each order below (all of them when none is named)
and prints each file's size and SHA-256 (the same N and SEED give the same bytes with the same
DuckDB).

With --chunked (export order only) the file is written a piece at a time: one DuckDB run per
(mode, condition, sample, test), whose rows are the export order's consecutive run of rows for
it, then one streaming concatenation of the pieces in that order. It gives the same rows in the
same order as one run, in a fraction of the memory: at 10^9 answers one run would hold the whole
study (tens of GB) in a DuckDB table.
"""
import hashlib
import pathlib
import sys

import duckdb

# Row orders: the import's (sorted), a parallel export's (every single-item row of every model,
# then every whole-test row, the models interleaved row by row), and a full shuffle.
ORDERS = {
    "sorted": "model, condition, sample, test, item NULLS FIRST",
    "export": "mode, condition, sample, test, item, model",
    "shuffled": "hash(@SEED@, model, condition, sample, test, item), "
                "model, condition, sample, test, item",
}


def models_for(n):
    """The fewest models whose item answers reach n (models 2, 7 and 12 of each 16 lack ST1)."""
    m = total = 0
    while total < n:
        total += 1680 if m % 16 in (2, 7, 12) else 2184
        m += 1
    return m, total


def script(models, seed, where="TRUE"):
    """answers.sql for `models` models and `seed`, its administrations limited to `where`."""
    return (pathlib.Path(__file__).with_name("answers.sql").read_text()
            .replace("@MODELS@", str(models)).replace("@SEED@", str(seed))
            .replace("@WHERE@", where))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def report(name, path):
    print(f"{name}: {path.stat().st_size / 1e6:.1f} MB, sha256 {sha256(path)}", flush=True)


def write_chunked(models, seed, out):
    """The export order, one (mode, condition, sample, test) at a time, then concatenated."""
    con = duckdb.connect()
    con.execute(script(0, seed))
    pieces = con.execute(
        "SELECT c.mode, c.condition, CAST(s.sample AS INTEGER), t.test FROM conds c "
        "CROSS JOIN tests t CROSS JOIN LATERAL (SELECT unnest(range(1, c.samples + 1)) AS sample) s "
        "ORDER BY ALL").fetchall()
    con.close()
    parts = out / "export.parts"
    parts.mkdir()
    files, requests = [], 0
    for i, (_mode, condition, sample, test) in enumerate(pieces):
        con = duckdb.connect()
        con.execute(script(models, seed, f"c.condition = '{condition}' AND s.sample = {sample} "
                                         f"AND t.test = '{test}'"))
        requests += con.execute("SELECT count(*) FROM records").fetchone()[0]
        path = parts / f"{i:03}.parquet"
        con.execute(f"COPY (SELECT * FROM stored ORDER BY item, model) TO '{path}' (FORMAT parquet)")
        con.close()
        files.append(str(path))
        print(f"  piece {i + 1}/{len(pieces)}: {condition}[{sample}] {test}", flush=True)
    path = out / "export.parquet"
    con = duckdb.connect()
    # DuckDB keeps the order of the files and of their rows (preserve_insertion_order, its default).
    con.execute(f"COPY (SELECT * FROM read_parquet({files!r})) TO '{path}' (FORMAT parquet)")
    con.close()
    for f in files:
        pathlib.Path(f).unlink()
    parts.rmdir()
    return requests, path


def main():
    args = [a for a in sys.argv[1:] if a != "--chunked"]
    chunked = len(args) < len(sys.argv) - 1
    n, seed, out = int(args[0]), int(args[1]), pathlib.Path(args[2])
    orders = args[3:] or list(ORDERS)
    unknown = [o for o in orders if o not in ORDERS]
    if unknown:
        sys.exit(f"unknown order {unknown[0]!r}: one of {', '.join(ORDERS)}")
    models, answers = models_for(n)
    if chunked:
        if orders != ["export"]:
            sys.exit("--chunked writes the export order only")
        requests, path = write_chunked(models, seed, out)
        print(f"{models} models, {requests} requests, {answers} item answers (seed {seed})")
        report("export", path)
        return
    con = duckdb.connect()
    con.execute(script(models, seed))
    requests = con.execute("SELECT count(*) FROM records").fetchone()[0]
    print(f"{models} models, {requests} requests, {answers} item answers (seed {seed})")
    for name in orders:
        path = out / f"{name}.parquet"
        con.execute(f"COPY (SELECT * FROM stored ORDER BY {ORDERS[name].replace('@SEED@', str(seed))}) "
                    f"TO '{path}' (FORMAT parquet)")
        report(name, path)


if __name__ == "__main__":
    main()
