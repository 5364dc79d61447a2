"""Splits a `perf` profile of `mm serve` under load into the parts of the service's work.

    perf record -a -F 199 --call-graph dwarf,16384 -o perf.data -- sleep 6   # during the reports
    perf script -i perf.data --no-inline -F pid,comm,ip,sym > samples.txt
    python3 tests/bench/perf_split.py samples.txt SERVER_PID

Prints the share of all samples taken by each process and idle, then the server's samples by
part: a sample of the flush's threads belongs to the flush; any other to the first part whose
function appears anywhere on its stack (the ReportMatch handler before the HTTP/2 transport that
calls it, and so on), and otherwise to its thread's name. `--callees PATTERN` lists instead what the frames called by the outermost
function matching PATTERN spend, one level down.
"""

import collections
import re
import sys

# (part, a substring of a function name on the stack), first match wins.
PARTS = [
    ("ReportMatch handler", "Matcher>::report_match"),
    ("Score handler", "MatcherService::inline"),
    ("Score handler", "Matcher>::score"),
    ("flush", "Live::flush"),
    ("write-ahead log", "wal::Writer::run"),
    ("following the lake", "Live::sync"),
    ("HTTP/2, gRPC and TCP", "h2::"),
    ("HTTP/2, gRPC and TCP", "hyper"),
    ("tokio's scheduler", "tokio::runtime"),
]

# The flush's threads: `mm-serve-flush` and its background thread, `mm-serve-flushbg` (whose
# stacks start in rayon's worker, not in `Live::flush`), their names cut to 15 bytes.
FLUSH_THREADS = "mm-serve-flush"

OFFSET = re.compile(r"\+0x[0-9a-f]+$")


def samples(path):
    """Each sample as (pid, thread name, frames leaf first)."""
    out, cur = [], None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if cur:
                    out.append(cur)
                cur = None
                continue
            if not line[0].isspace():
                # "comm pid" (perf prints the thread name first, then the process id).
                fields = line.split()
                cur = (fields[-1].rstrip(":"), " ".join(fields[:-1]), [])
                continue
            if cur is not None:
                parts = line.strip().split(" ", 1)
                cur[2].append(OFFSET.sub("", parts[-1]))
    if cur:
        out.append(cur)
    return out


def split(all_samples, server):
    total = len(all_samples)
    by_process = collections.Counter()
    for pid, comm, _ in all_samples:
        by_process["idle" if pid == "0" else f"pid {pid}" + (" (server)" if pid == server else "")] += 1
    print(f"{total} samples")
    for k, v in by_process.most_common(8):
        print(f"{100 * v / total:6.1f} %  {k}")
    mine = [s for s in all_samples if s[0] == server]
    print(f"\nthe server's {len(mine)} samples by part")
    parts = collections.Counter()
    for _, comm, frames in mine:
        if comm.startswith(FLUSH_THREADS):
            part = "flush"
        else:
            part = next((p for p, pat in PARTS if any(pat in f for f in frames)), f"other ({comm})")
        parts[part] += 1
    for k, v in parts.most_common():
        print(f"{100 * v / len(mine):6.1f} %  {k}")


def callees(all_samples, server, pattern):
    counts, n = collections.Counter(), 0
    for pid, _, frames in all_samples:
        if pid != server:
            continue
        at = [i for i, f in enumerate(frames) if pattern in f]
        if not at or at[-1] == 0:
            continue
        n += 1
        counts[frames[at[-1] - 1][:110]] += 1
    print(f"{n} samples under {pattern}")
    for k, v in counts.most_common(15):
        print(f"{100 * v / n:6.1f} %  {k}")


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    s = samples(argv[1])
    if len(argv) >= 5 and argv[3] == "--callees":
        callees(s, argv[2], argv[4])
    else:
        split(s, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
