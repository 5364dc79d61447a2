"""Writes a lake's matches table out as the common Python engines do, with their defaults.

    python tests/roundtrip/export.py LAKE OUT

For each engine (polars, pandas, DuckDB, pyarrow) and each format it writes (CSV, JSON lines,
Parquet), one file `OUT/<engine>.<ext>` holding the table's rows as read with `deltalake`, each
engine's own default writer called with no options beyond the path. The end-to-end test
`roundtrip::` ingests every file back and compares the rows. pyarrow has no JSON writer, so it
writes CSV and Parquet only. The lake's own bookkeeping columns (`source_file`, `source_line`,
`day`) are written too: a user's export carries them, and ingest must take such a file.
"""

import os
import sys

import deltalake
import duckdb
import pandas as pd
import polars as pl
import pyarrow.csv as pacsv
import pyarrow.parquet as pq


def main() -> None:
    lake, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    table = deltalake.DeltaTable(os.path.join(lake, "matches")).to_pyarrow_table()
    written = []

    df = pl.from_arrow(table)
    df.write_csv(f"{out}/polars.csv")
    df.write_ndjson(f"{out}/polars.jsonl")
    df.write_parquet(f"{out}/polars.parquet")
    written += ["polars.csv", "polars.jsonl", "polars.parquet"]

    pdf = table.to_pandas()
    pdf.to_csv(f"{out}/pandas.csv", index=False)
    pdf.to_json(f"{out}/pandas.jsonl", orient="records", lines=True)
    pdf.to_parquet(f"{out}/pandas.parquet", index=False)
    written += ["pandas.csv", "pandas.jsonl", "pandas.parquet"]

    con = duckdb.connect()
    con.register("matches", table)
    con.execute(f"COPY matches TO '{out}/duckdb.csv'")
    con.execute(f"COPY matches TO '{out}/duckdb.jsonl' (FORMAT json)")
    con.execute(f"COPY matches TO '{out}/duckdb.parquet' (FORMAT parquet)")
    written += ["duckdb.csv", "duckdb.jsonl", "duckdb.parquet"]

    pacsv.write_csv(table, f"{out}/pyarrow.csv")
    pq.write_table(table, f"{out}/pyarrow.parquet")
    written += ["pyarrow.csv", "pyarrow.parquet"]

    print(f"{table.num_rows} rows into {len(written)} files: {' '.join(written)}")


if __name__ == "__main__":
    main()
