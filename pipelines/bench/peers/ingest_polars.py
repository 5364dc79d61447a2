import json, os, resource, sys, time
os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count()))
import polars as pl
csv, out, variant = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter()
if variant == "eager":
    pl.read_csv(csv).write_parquet(out, compression="zstd", compression_level=3)
else:
    pl.scan_csv(csv).sink_parquet(out, compression="zstd", compression_level=3)
s = time.perf_counter() - t
n = pl.scan_parquet(out).select(pl.len()).collect().item()
print(json.dumps({"seconds": s, "rows": n, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "polars": pl.__version__}))
