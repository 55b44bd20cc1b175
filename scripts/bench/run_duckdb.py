"""Run scripts/bench/cells.sql in DuckDB: python3 run_duckdb.py ANSWERS KEY NORMS OUT.

DuckDB at its defaults (every core, 80% of the memory), except that it need not keep the order
of rows no query sorts, as a user after speed would set."""
import pathlib
import sys

import duckdb

answers, key, norms, out = sys.argv[1:5]
sql = (pathlib.Path(__file__).with_name("cells.sql").read_text()
       .replace("@ANSWERS@", answers).replace("@KEY@", key)
       .replace("@NORMS@", norms).replace("@OUT@", out))
con = duckdb.connect()
con.execute("SET preserve_insertion_order = false")
con.execute(sql)
