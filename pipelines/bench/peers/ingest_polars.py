import json, os, resource, sys, time
os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count()))
import polars as pl
csv, out, variant = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter()
r0 = resource.getrusage(resource.RUSAGE_SELF)
if variant == "eager":
    pl.read_csv(csv).write_parquet(out, compression="zstd", compression_level=3)
elif variant == "lazy":
    pl.scan_csv(csv).sink_parquet(out, compression="zstd", compression_level=3)
else:
    # The lake's layout: identifiers as text, one file per day of the start time, rows in the
    # lake's order (start, match, team, input order within a team), zstd level 1.
    ids = {c: pl.String for c in ("match_id", "player_id", "party_id")}
    (pl.scan_csv(csv, schema_overrides=ids)
        .sort(["start_ts", "match_id", "team"], maintain_order=True)
        .with_columns(day=pl.from_epoch("start_ts").dt.date())
        .sink_parquet(pl.PartitionBy(out, key="day", include_key=False),
                      compression="zstd", compression_level=1, mkdir=True))
s = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
n = pl.scan_parquet(out).select(pl.len()).collect().item()
files = sum(len(f) for _, _, f in os.walk(out)) if os.path.isdir(out) else 1
print(json.dumps({"seconds": s, "cpu_seconds": cpu, "rows": n, "files": files,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "polars": pl.__version__}))
