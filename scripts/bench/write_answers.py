"""Write the benchmark's stored-answer file in every row order, with DuckDB.

python3 write_answers.py N SEED DIR: runs scripts/bench/answers.sql for the fewest models whose
item answers reach N (13 models in 16 answer 2,184 items, the 3 without ST1 answer 1,680), then
writes DIR/<order>.parquet for each order below and prints each file's size and SHA-256
(the same N and SEED give the same bytes with the same DuckDB).
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


def main():
    n, seed, out = int(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3])
    models, answers = models_for(n)
    sql = (pathlib.Path(__file__).with_name("answers.sql").read_text()
           .replace("@MODELS@", str(models)).replace("@SEED@", str(seed)))
    con = duckdb.connect()
    con.execute(sql)
    requests = con.execute("SELECT count(*) FROM records").fetchone()[0]
    print(f"{models} models, {requests} requests, {answers} item answers (seed {seed})")
    for name, order in ORDERS.items():
        path = out / f"{name}.parquet"
        con.execute(f"COPY (SELECT * FROM stored ORDER BY {order.replace('@SEED@', str(seed))}) "
                    f"TO '{path}' (FORMAT parquet)")
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        print(f"{name}: {path.stat().st_size / 1e6:.1f} MB, sha256 {sha}")


if __name__ == "__main__":
    main()
