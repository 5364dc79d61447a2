"""Shared helpers for the analyst notebooks: where the lake, the artifact, the retrain work
folder and the evaluation report are, and small readers for them.

Paths come from environment variables, else from the README's main command's outputs
(`mm retrain data/sample --simulate data/world.toml` writes out/lake, out/models and
out/retrain, with one model and one work folder per mode):

- MM_LAKE      the lake (default out/lake)
- MM_MODELS    the models root (default out/models)
- MM_ARTIFACT  one artifact version folder (default: LATEST of the only model under MM_MODELS,
               or of MM_MODEL when several)
- MM_MODEL     which model, when MM_MODELS holds several (default: the first by name)
- MM_WORK      the retrain work folder (default out/retrain; the model's outputs are in
               MM_WORK/<model>), or a folder holding `mm fit`'s skill/ and churn/
- MM_EVAL      an evaluation.json (default <work>/evaluation/evaluation.json)
- MM_BIN       the `mm` binary, for `mm lake show` (default: `mm` on the PATH)

Relative paths are taken from the project root (the folder holding Cargo.toml). MM_LAKE may be
an object-store URL (s3://, gs://, az://), read with the environment's credentials.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import polars as pl


def root() -> Path:
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if (p / "Cargo.toml").exists():
            return p
    return here


def _path(var: str, default: str) -> Path:
    p = Path(os.environ.get(var, default))
    return p if p.is_absolute() else root() / p


def lake() -> str:
    """The lake: a local path (relative ones from the project root) or an object-store URL
    (`s3://bucket/lake`, read with the same `AWS_*`, `GOOGLE_*`, `AZURE_*` environment as `mm`)."""
    value = os.environ.get("MM_LAKE", "out/lake")
    if "://" in value and not value.startswith("file://"):
        return value.rstrip("/")
    return str(_path("MM_LAKE", "out/lake"))


def model_name(models: Path) -> str:
    """The model to open: MM_MODEL, else the first (by name) with a LATEST version."""
    names = sorted(p.name for p in models.iterdir() if (p / "LATEST").exists()) if models.is_dir() else []
    if not names:
        raise FileNotFoundError(f"{models}: no model with a LATEST version; run `mm retrain` first")
    name = os.environ.get("MM_MODEL", names[0])
    if len(names) > 1 and "MM_MODEL" not in os.environ:
        print(f"several models under {models} ({', '.join(names)}); opening {name} (set MM_MODEL)")
    return name


def work() -> Path:
    """The fits' and evaluation's folder: `mm retrain` keeps one per model (MM_WORK/<model>);
    a folder of `mm fit` outputs is used as it is."""
    base = _path("MM_WORK", "out/retrain")
    if (base / "skill").is_dir() or (base / "evaluation").is_dir():
        return base
    return base / model_name(_path("MM_MODELS", "out/models"))


def evaluation_path() -> Path:
    if "MM_EVAL" in os.environ:
        return _path("MM_EVAL", "")
    return work() / "evaluation" / "evaluation.json"


def artifact() -> Path:
    """The artifact version folder to open."""
    if "MM_ARTIFACT" in os.environ:
        return _path("MM_ARTIFACT", "")
    models = _path("MM_MODELS", "out/models")
    name = model_name(models)
    version = (models / name / "LATEST").read_text().strip()
    return models / name / version


def read_json(path: Path) -> dict:
    with open(path) as f:
        return json.load(f)


def matches(version: int | None = None) -> pl.LazyFrame:
    """Every player-match row of the lake's `matches` Delta table (the latest version, or
    `version`), read through the Delta log by the `deltalake` package, as any engine would."""
    return pl.scan_delta(f"{lake()}/matches", version=version)


def lake_show() -> dict | None:
    """`mm lake show --json` on the lake (None when no `mm` binary is at hand)."""
    exe = os.environ.get("MM_BIN") or shutil.which("mm")
    if not exe:
        print("no mm binary (set MM_BIN): not comparing with `mm lake show`")
        return None
    out = subprocess.run([exe, "lake", "show", "--lake", lake(), "--json"], check=True, capture_output=True)
    return json.loads(out.stdout)


def reliability(p: pl.Series, y: pl.Series, bins: int = 10) -> pl.DataFrame:
    """Equal-width reliability table: per bin, count, mean prediction and observed rate."""
    df = pl.DataFrame({"p": p, "y": y.cast(pl.Float64)})
    return (
        df.with_columns((pl.col("p") * bins).floor().clip(0, bins - 1).cast(pl.Int32).alias("bin"))
        .group_by("bin")
        .agg(pl.len().alias("n"), pl.col("p").mean().alias("mean_predicted"), pl.col("y").mean().alias("observed"))
        .sort("bin")
    )


def ece(table: pl.DataFrame) -> float:
    n = table["n"].sum()
    return float(((table["mean_predicted"] - table["observed"]).abs() * table["n"]).sum() / n)


def log_loss(p: pl.Series, y: pl.Series) -> float:
    import math

    eps = 1e-15
    total = 0.0
    for pi, yi in zip(p.to_list(), y.to_list()):
        pi = min(max(pi, eps), 1 - eps)
        total -= math.log(pi) if yi else math.log(1 - pi)
    return total / len(p)


def auc(p: pl.Series, y: pl.Series) -> float:
    """Rank-sum (Mann-Whitney) AUC with average ranks for ties."""
    df = pl.DataFrame({"p": p, "y": y.cast(pl.Int64)}).with_columns(pl.col("p").rank("average").alias("r"))
    pos = df.filter(pl.col("y") == 1)
    n1, n0 = pos.height, df.height - pos.height
    if n1 == 0 or n0 == 0:
        return float("nan")
    return float((pos["r"].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def binned_auc(p: pl.Series, y: pl.Series, bins: int = 65536) -> tuple[float, float]:
    """The AUC as `mm fit churn` reports it (predictions counted in `bins` equal-width bins of
    [0, 1], two predictions in one bin a tie), and the share of positive-negative pairs that share
    a bin: the exact AUC lies within half that share of the binned one."""
    df = (
        pl.DataFrame({"p": p, "y": y.cast(pl.Int64)})
        .with_columns((pl.col("p").clip(0.0, 1.0) * bins).floor().cast(pl.Int64).clip(0, bins - 1).alias("b"))
        .group_by("b")
        .agg(pl.col("y").sum().alias("pos"), (1 - pl.col("y")).sum().alias("neg"))
        .sort("b")
    )
    pos, neg = df["pos"].to_list(), df["neg"].to_list()
    n1, n0 = sum(pos), sum(neg)
    if n1 == 0 or n0 == 0:
        return float("nan"), 0.0
    below, credit, shared = 0, 0.0, 0
    for a, b in zip(pos, neg):
        credit += a * (below + b / 2)
        below += b
        shared += a * b
    return credit / (n1 * n0), shared / (n1 * n0)
