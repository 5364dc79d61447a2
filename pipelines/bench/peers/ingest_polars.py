import json, os, resource, sys, time
os.environ.setdefault("POLARS_MAX_THREADS", str(os.cpu_count()))
import polars as pl
csv, out, variant = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter()
r0 = resource.getrusage(resource.RUSAGE_SELF)
if variant == "eager":
    pl.read_csv(csv).write_parquet(out, compression="zstd", compression_level=3)
else:
    pl.scan_csv(csv).sink_parquet(out, compression="zstd", compression_level=3)
s = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
n = pl.scan_parquet(out).select(pl.len()).collect().item()
print(json.dumps({"seconds": s, "cpu_seconds": cpu, "rows": n, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "polars": pl.__version__}))
