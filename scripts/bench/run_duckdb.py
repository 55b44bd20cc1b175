"""Run scripts/bench/cells.sql in DuckDB: python3 run_duckdb.py ANSWERS KEY NORMS OUT [TEMP].

DuckDB at its defaults (every core, 80% of the memory), except that it need not keep the order
of rows no query sorts, as a user after speed would set; with TEMP, it spills to that folder
(DuckDB's own default for an in-memory database is .tmp in the working folder)."""
import pathlib
import sys

import duckdb

answers, key, norms, out = sys.argv[1:5]
sql = (pathlib.Path(__file__).with_name("cells.sql").read_text()
       .replace("@ANSWERS@", answers).replace("@KEY@", key)
       .replace("@NORMS@", norms).replace("@OUT@", out))
con = duckdb.connect()
con.execute("SET preserve_insertion_order = false")
if len(sys.argv) > 5:
    con.execute(f"SET temp_directory = '{sys.argv[5]}'")
con.execute(sql)
