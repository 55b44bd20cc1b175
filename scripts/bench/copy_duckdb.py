"""Copy a Parquet file with DuckDB: python3 copy_duckdb.py IN OUT.

The I/O floor of the benchmark (docs/performance.md): what the peer itself needs to read a table
and write it again, with the settings of run_duckdb.py. protospread's stages must at least do
that for the tables their contracts publish (the fetched copy of the stored answers, the parsed
answers), so this time bounds how far below the DuckDB script their sum can go."""
import sys

import duckdb

src, out = sys.argv[1:3]
con = duckdb.connect()
con.execute("SET preserve_insertion_order = false")
con.execute("SET enable_progress_bar = false")
con.execute("COPY (SELECT * FROM read_parquet(?)) TO '" + out.replace("'", "''") + "' (FORMAT parquet)",
            [src])
