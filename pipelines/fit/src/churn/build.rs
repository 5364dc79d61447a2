//! The churn feature table in bounded memory, per player-hash bucket, in shards.
//!
//! [`crate::churn::features`] states the table as one polars query over the whole lake; its
//! peak memory grows with the rows. Here the same query runs in two passes whose memory depends
//! on one day of matches and on `chunk_rows`, not on the lake's size:
//!
//! 1. **per day** (the lake's `day` partitions, in order): step 1 of the query (the per-match
//!    values: score difference, blowout, performance rank, party; the skill percentile and the
//!    simulator's truth joined on) over every player of the day, since a match's values need all
//!    of its players. Each row's player falls in a bucket by a stable hash of the player id
//!    ([`player_share`]). This shard's rows of consecutive days are held until they reach
//!    `chunk_rows`; then they are written as one spill file, bucket after bucket, each
//!    bucket's rows one row group, and where each bucket's rows start is noted. (A file per
//!    bucket and day cost about 2.6 ms a file, measured with 120 buckets against 12 on an
//!    11.9M-row lake; with 112 buckets, the 111.8M-row lake's 280 days of 0.4M rows made
//!    31,000 files of about 3,600 rows, and a file per bucket and spill still 10,528: that
//!    count grows with the square of the lake, a file per spill with the lake. No writer
//!    stays open across spills: open Parquet writers keep every row group's metadata, which
//!    would grow with buckets times spills.) The data's first and last match start are noted.
//! 2. **per bucket**: the bucket's rows (whole players: every match of a player is in its
//!    bucket), read from its row group of each spill file, are sorted by player, start and
//!    match, and steps 2 to 4 of the query run on them with the data's bounds as literals,
//!    giving the bucket's part of the feature table and of the player state table, each
//!    written as one Parquet file. The bucket's step-1 rows (about fifteen columns) are held
//!    whole; its feature rows (125 columns in the default table) are computed and written
//!    [`WIDE_ROWS`] rows of whole players at a time, one row group each. The spill files are
//!    removed at the end: each holds rows of every bucket.
//!
//! A shard `K/N` owns the players whose share lies in `[K/N, (K+1)/N)`, split into as many
//! buckets as keep each one near `chunk_rows` rows. Shards share nothing but their inputs, so
//! any batch scheduler can run them on as many machines; each commits its files to the Delta
//! tables of [`crate::churn::table`] as one transaction.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use mm_lake::Lake;
use polars::prelude::*;

use crate::churn::features::{
    FeatureQuery, features_of_sorted, per_match_values, scan, sorted, state_of_sorted,
};
use crate::error::{FitError, out_err, pl_err};

use mm_lake::schema::DAY_MS;

/// Feature rows computed and written at a time (rounded up to whole players): a slice of a
/// bucket's step-1 rows goes through steps 2 to 4 and is written as one row group, so that the
/// wide rows in memory, with the query's temporaries, do not grow with the bucket. Polars'
/// writer cuts row groups at this size too.
pub const WIDE_ROWS: usize = 1 << 18;

/// Which players a process handles: the `K`-th of `N` equal ranges of [`player_share`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub k: u32,
    pub n: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { k: 0, n: 1 }
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    /// `K/N` with `0 <= K < N`, e.g. `3/8`.
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("{s:?}: expected K/N with 0 <= K < N, e.g. 3/8");
        let (k, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let (k, n): (u32, u32) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if n == 0 || k >= n || n > 4096 {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

impl Shard {
    /// The partition value of this shard in the derived tables: `K-of-N`.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{}-of-{}", self.k, self.n)
    }

    /// Parses [`Shard::label`].
    #[must_use]
    pub fn from_label(s: &str) -> Option<Shard> {
        let (k, n) = s.split_once("-of-")?;
        format!("{k}/{n}").parse().ok()
    }

    /// Whether a player's share falls in this shard, and in which of its `buckets` buckets.
    #[must_use]
    pub fn bucket(&self, share: f64, buckets: usize) -> Option<usize> {
        let x = share * f64::from(self.n) - f64::from(self.k);
        (0.0..1.0)
            .contains(&x)
            .then(|| ((x * buckets as f64) as usize).min(buckets - 1))
    }
}

/// A player's position in [0, 1) by id: FNV-1a of the id's bytes (stable across runs, machines
/// and versions), its top 53 bits as a fraction. Shards, buckets and the capped training sample
/// all cut this one number.
#[must_use]
pub fn player_share(id: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildInput {
    /// The query's options (`files` is ignored: the lake's days are read one at a time).
    pub query: FeatureQuery,
    /// The simulator's truth column to carry (`churn_8h`, ...), read from the local lake's
    /// `truth/player_matches/day=*/` when present.
    pub truth_column: Option<String>,
    pub shard: Shard,
    /// Rows per bucket to aim for (memory grows with it).
    pub chunk_rows: usize,
    /// Feature rows computed and written at a time ([`WIDE_ROWS`]; a test sets it small).
    pub wide_rows: usize,
    /// Where the spill files and the output parts are written (emptied first).
    pub scratch: PathBuf,
}

/// One bucket's output.
#[derive(Debug, Clone)]
pub struct BuiltPart {
    pub features: PathBuf,
    pub state: PathBuf,
    pub rows: u64,
}

/// What [`build`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BuildStats {
    pub shard: String,
    /// Rows of the mode read from the lake (all players: a match needs all of its rows).
    pub rows_read: u64,
    /// Rows of this shard's players: the rows of its part of the table.
    pub rows: u64,
    pub buckets: usize,
    pub data_start_ms: i64,
    pub data_end_ms: i64,
    pub per_day_seconds: f64,
    pub per_bucket_seconds: f64,
    /// Spill files the first pass wrote (one per spill of the pending days).
    pub spill_files: usize,
    #[serde(skip)]
    pub parts: Vec<BuiltPart>,
}

/// How a file is compressed: the spill files are read once, a moment later, by this process;
/// the parts are the tables other engines read.
#[derive(Clone, Copy)]
enum Written {
    /// LZ4: polars wrote a 0.8M-row part of the table in 0.95 s against zstd's 1.62 s, in
    /// files 1.5 times as large.
    Spill,
    /// zstd at level 1: polars' default level 3 spent 18% of the feature build's second pass
    /// compressing (`perf`); at level 1 the 11.2M-row table is 8% larger.
    Part,
}

/// A Parquet writer of a new file at `p`.
fn writer(p: &Path, how: Written) -> Result<ParquetWriter<File>, FitError> {
    let compression = match how {
        Written::Spill => ParquetCompression::Lz4Raw,
        Written::Part => {
            ParquetCompression::Zstd(polars_parquet::write::ZstdLevel::try_new(1).ok())
        }
    };
    let f = File::create(p).map_err(out_err(p))?;
    Ok(ParquetWriter::new(f).with_compression(compression))
}

/// Writes `df` as one Parquet file at `p`.
fn write_file(p: &Path, df: &mut DataFrame, how: Written) -> Result<(), FitError> {
    writer(p, how)?.finish(df).map_err(pl_err)?;
    Ok(())
}

/// Cuts rows sorted by player (`pid`: a player's rows are consecutive) into `(offset, len)`
/// slices of whole players, in order, covering every row. A slice passes `max` rows only when
/// it is one player with more. No rows give one empty slice (an empty part is still written).
fn player_slices(pid: &[u32], max: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut start, mut player) = (0, 0);
    for i in 1..=pid.len() {
        if i < pid.len() && pid[i] == pid[i - 1] {
            continue;
        }
        // The player of rows [player, i) ends: cut before it when it would overfill the slice.
        if i - start > max && player > start {
            out.push((start, player - start));
            start = player;
        }
        player = i;
    }
    if pid.len() > start || out.is_empty() {
        out.push((start, pid.len() - start));
    }
    out
}

/// Steps 2 to 4 on a bucket's sorted step-1 rows, `slice_rows` rows of whole players at a time
/// ([`WIDE_ROWS`] in `mm`), each slice written to `p` as a row group as soon as it is computed.
fn write_features(
    q: &FeatureQuery,
    per_match: &DataFrame,
    p: &Path,
    slice_rows: usize,
) -> Result<(), FitError> {
    let pid: Vec<u32> = per_match
        .column("pid")
        .and_then(|c| c.u32())
        .map_err(pl_err)?
        .into_no_null_iter()
        .collect();
    let mut out: Option<polars::io::parquet::write::BatchedWriter<File>> = None;
    for (offset, len) in player_slices(&pid, slice_rows) {
        let mut feats = features_of_sorted(q, per_match.slice(offset as i64, len).lazy())
            .and_then(LazyFrame::collect)
            .map_err(pl_err)?;
        // The writer takes one row group of aligned chunks.
        feats.rechunk_mut_par();
        let w = match &mut out {
            Some(w) => w,
            None => out.insert(
                writer(p, Written::Part)?
                    .batched(feats.schema())
                    .map_err(pl_err)?,
            ),
        };
        w.write_batch(&feats).map_err(pl_err)?;
    }
    if let Some(w) = out {
        w.finish().map_err(pl_err)?;
    }
    Ok(())
}

/// Where a bucket's rows of one spill are: `len` rows from row `offset` of spill file `file`.
#[derive(Debug, Clone, Copy)]
struct SpillSlice {
    file: usize,
    offset: usize,
    len: usize,
}

/// Writes the pending days' rows as one spill file, bucket after bucket, each bucket's rows one
/// row group, notes where each bucket's rows are in `slices`, and empties `pending`. Each day's
/// frame holds its rows grouped by bucket, bucket `b` at rows `counts[b]..counts[b + 1]`.
fn spill(
    scratch: &Path,
    pending: &mut Vec<(DataFrame, Vec<usize>)>,
    files: &mut Vec<PathBuf>,
    slices: &mut [Vec<SpillSlice>],
) -> Result<(), FitError> {
    if pending.is_empty() {
        return Ok(());
    }
    let p = scratch.join(format!("spill-{:05}.parquet", files.len()));
    let mut out: Option<polars::io::parquet::write::BatchedWriter<File>> = None;
    let mut offset = 0;
    for (b, bucket) in slices.iter_mut().enumerate() {
        let mut rows: Option<DataFrame> = None;
        for (df, counts) in pending.iter() {
            let (a, z) = (counts[b], counts[b + 1]);
            if z == a {
                continue;
            }
            let part = df.slice(a as i64, z - a);
            match &mut rows {
                Some(r) => {
                    r.vstack_mut(&part).map_err(pl_err)?;
                }
                None => rows = Some(part),
            }
        }
        if let Some(mut r) = rows {
            // One chunk: the writer makes a row group of each.
            r.rechunk_mut_par();
            let w = match &mut out {
                Some(w) => w,
                None => out.insert(
                    writer(&p, Written::Spill)?
                        .batched(r.schema())
                        .map_err(pl_err)?,
                ),
            };
            w.write_batch(&r).map_err(pl_err)?;
            bucket.push(SpillSlice {
                file: files.len(),
                offset,
                len: r.height(),
            });
            offset += r.height();
        }
    }
    if let Some(w) = out {
        w.finish().map_err(pl_err)?;
        files.push(p);
    }
    pending.clear();
    Ok(())
}

/// A bucket's rows in the spill files, as one query: a slice of each file (polars' reader skips
/// the row groups outside a slice), which the sort after it reads as it goes. Reading the
/// slices eagerly and sorting the frame took 15% less time in this pass but peaked 60 to
/// 110 MiB higher (699 to 744 MiB against 637 MiB on the 111.8M-row lake).
fn spilled(files: &[PathBuf], slices: &[SpillSlice]) -> PolarsResult<LazyFrame> {
    let parts =
        slices
            .iter()
            .map(|s| {
                Ok(scan(std::slice::from_ref(&files[s.file]))?
                    .slice(s.offset as i64, s.len as IdxSize))
            })
            .collect::<PolarsResult<Vec<_>>>()?;
    concat(
        parts,
        UnionArgs {
            rechunk: false,
            ..UnionArgs::default()
        },
    )
}

/// The simulator's per-player-match truth files of one day, when the lake is local and has them.
pub fn truth_files(lake: &Lake, day: i32) -> Vec<PathBuf> {
    let Some(root) = lake.root().local() else {
        return Vec::new();
    };
    let dir = root
        .join("truth/player_matches")
        .join(mm_lake::schema::day_dir_name(day));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    files
}

/// Builds this shard's part of the feature and state tables from `lake` (see the module's
/// documentation), writing one features file and one state file per bucket into
/// `input.scratch`.
pub fn build(lake: &Lake, input: &BuildInput) -> Result<BuildStats, FitError> {
    let q = &input.query;
    let scratch = &input.scratch;
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch).map_err(out_err(scratch))?;
    // Buckets from the snapshot's row count (every mode: an upper bound), so that a bucket holds
    // about `chunk_rows` rows.
    let lake_rows: u64 = lake.match_entries().iter().filter_map(|f| f.rows).sum();
    let shard_rows = lake_rows / u64::from(input.shard.n);
    let buckets = usize::try_from(shard_rows.div_ceil(input.chunk_rows.max(1) as u64))
        .unwrap_or(1)
        .clamp(1, 4096);
    let t0 = Instant::now();
    let (mut tmin, mut tmax, mut rows_read, mut rows) = (i64::MAX, i64::MIN, 0u64, 0u64);
    let mut spill_files: Vec<PathBuf> = Vec::new();
    let mut spills: Vec<Vec<SpillSlice>> = vec![Vec::new(); buckets];
    let mut spill_schema: Option<Schema> = None;
    // This shard's rows of the days read since the last spill, each day's grouped by bucket
    // (with the bucket offsets): spilled once they reach `chunk_rows`.
    let mut pending: Vec<(DataFrame, Vec<usize>)> = Vec::new();
    let mut pending_rows = 0usize;
    let days = lake.days()?;
    let mut meter =
        mm_run::progress::Meter::new("churn features: pass 1 (per day)", "rows", Some(lake_rows));
    for day in days {
        let df = day_rows(lake, input, day)?;
        if spill_schema.is_none() {
            spill_schema = Some(df.schema().as_ref().clone());
        }
        if df.height() == 0 {
            continue;
        }
        rows_read += df.height() as u64;
        meter.add(df.height() as u64);
        let start = df
            .column("start_ms")
            .and_then(|c| c.i64())
            .map_err(pl_err)?;
        if let (Some(a), Some(b)) = (start.min(), start.max()) {
            tmin = tmin.min(a);
            tmax = tmax.max(b);
        }
        let (mine, counts) = by_bucket(df, input.shard, buckets)?;
        rows += mine.height() as u64;
        pending_rows += mine.height();
        pending.push((mine, counts));
        if pending_rows >= input.chunk_rows {
            spill(scratch, &mut pending, &mut spill_files, &mut spills)?;
            pending_rows = 0;
        }
    }
    spill(scratch, &mut pending, &mut spill_files, &mut spills)?;
    meter.finish();
    let per_day_seconds = t0.elapsed().as_secs_f64();
    if rows_read == 0 {
        return Err(FitError::Empty(lake.root().to_string().into()));
    }
    let q = FeatureQuery {
        data_start_ms: Some(tmin),
        data_end_ms: Some(tmax),
        ..q.clone()
    };
    let schema = spill_schema.unwrap_or_default();
    let t1 = Instant::now();
    let parts = write_buckets(&q, input, &spill_files, &spills, &schema, rows)?;
    for f in &spill_files {
        let _ = std::fs::remove_file(f);
    }
    Ok(BuildStats {
        shard: input.shard.to_string(),
        rows_read,
        rows,
        buckets,
        data_start_ms: tmin,
        data_end_ms: tmax,
        per_day_seconds,
        per_bucket_seconds: t1.elapsed().as_secs_f64(),
        spill_files: spill_files.len(),
        parts,
    })
}

/// One day's step 1 rows (the per-match values, with the skill percentile and, when asked, the
/// simulator's truth joined on), every player of the day: a match's values need all its players.
fn day_rows(lake: &Lake, input: &BuildInput, day: i32) -> Result<DataFrame, FitError> {
    let q = &input.query;
    let files = lake.partition_files(day)?;
    let lo = i64::from(day) * DAY_MS;
    let skill_lf = match q.skill.as_ref() {
        Some(p) => Some(
            scan(std::slice::from_ref(p)).map_err(pl_err)?.filter(
                col("start_ms")
                    .gt_eq(lit(lo))
                    .and(col("start_ms").lt(lit(lo + DAY_MS))),
            ),
        ),
        None => None,
    };
    let mut lf =
        per_match_values(scan(&files).map_err(pl_err)?, q, skill_lf, false).map_err(pl_err)?;
    if q.truth {
        let tf = match &input.truth_column {
            Some(_) => truth_files(lake, day),
            None => Vec::new(),
        };
        lf = match (&input.truth_column, tf.is_empty()) {
            (Some(c), false) => lf.join(
                scan(&tf).map_err(pl_err)?.select([
                    col("match_id"),
                    col("player_id"),
                    col(c.as_str())
                        .cast(DataType::Float64)
                        .alias("truth_p_churn"),
                ]),
                [col("match_id"), col("player_id")],
                [col("match_id"), col("player_id")],
                JoinArgs::new(JoinType::Left),
            ),
            _ => lf.with_column(lit(NULL).cast(DataType::Float64).alias("truth_p_churn")),
        };
    }
    lf.collect().map_err(pl_err)
}

/// This shard's rows of `df`, grouped by bucket (a counting sort of the row indices), with each
/// bucket's offset (`counts[b]..counts[b + 1]`).
fn by_bucket(
    df: DataFrame,
    shard: Shard,
    buckets: usize,
) -> Result<(DataFrame, Vec<usize>), FitError> {
    let ids = df
        .column("player_id")
        .and_then(|c| c.str())
        .map_err(pl_err)?;
    let bucket_of: Vec<Option<usize>> = ids
        .iter()
        .map(|id| shard.bucket(player_share(id.unwrap_or("")), buckets))
        .collect();
    let mut counts = vec![0usize; buckets + 1];
    for b in bucket_of.iter().flatten() {
        counts[b + 1] += 1;
    }
    for b in 0..buckets {
        counts[b + 1] += counts[b];
    }
    let mut next = counts.clone();
    let mut order = vec![0 as IdxSize; counts[buckets]];
    for (i, b) in bucket_of.iter().enumerate() {
        if let Some(b) = *b {
            order[next[b]] = i as IdxSize;
            next[b] += 1;
        }
    }
    let mine = df
        .take(&IdxCa::from_vec("idx".into(), order))
        .map_err(pl_err)?;
    Ok((mine, counts))
}

/// Pass 2: per bucket, steps 2 to 4 on its spilled rows, written as one features and one state
/// file into `input.scratch`.
fn write_buckets(
    q: &FeatureQuery,
    input: &BuildInput,
    spill_files: &[PathBuf],
    spills: &[Vec<SpillSlice>],
    schema: &Schema,
    rows: u64,
) -> Result<Vec<BuiltPart>, FitError> {
    let scratch = &input.scratch;
    let mut parts = Vec::new();
    let mut meter =
        mm_run::progress::Meter::new("churn features: pass 2 (per bucket)", "rows", Some(rows));
    for (b, spill) in spills.iter().enumerate() {
        let input_rows = if !spill.is_empty() {
            spilled(spill_files, spill).map_err(pl_err)?
        } else if b == 0 {
            // A shard with no rows still writes its (empty) part: readers see it done.
            DataFrame::empty_with_schema(schema).lazy()
        } else {
            continue;
        };
        let per_match = sorted(input_rows).collect().map_err(pl_err)?;
        let n = per_match.height() as u64;
        let features = scratch.join(format!("features-{b:05}.parquet"));
        write_features(q, &per_match, &features, input.wide_rows)?;
        let mut state = state_of_sorted(q, per_match.lazy())
            .and_then(LazyFrame::collect)
            .map_err(pl_err)?;
        let state_path = scratch.join(format!("state-{b:05}.parquet"));
        write_file(&state_path, &mut state, Written::Part)?;
        parts.push(BuiltPart {
            features,
            state: state_path,
            rows: n,
        });
        meter.add(n);
    }
    meter.finish();
    Ok(parts)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn slices_hold_whole_players() {
        assert_eq!(player_slices(&[], 4), [(0, 0)]);
        assert_eq!(player_slices(&[1, 1, 1], 1), [(0, 3)]);
        assert_eq!(
            player_slices(&[1, 1, 2, 3, 3, 3, 4], 3),
            [(0, 3), (3, 3), (6, 1)]
        );
        assert_eq!(
            player_slices(&[1, 2, 2, 2, 2, 3], 2),
            [(0, 1), (1, 4), (5, 1)]
        );
    }

    proptest::proptest! {
        #[test]
        fn slices_cover_every_row_and_split_no_player(
            runs in proptest::collection::vec(1usize..30, 0..60),
            max in 1usize..80,
        ) {
            let pid: Vec<u32> = runs
                .iter()
                .enumerate()
                .flat_map(|(p, &n)| std::iter::repeat_n(p as u32, n))
                .collect();
            let slices = player_slices(&pid, max);
            let mut next = 0;
            for (i, &(a, len)) in slices.iter().enumerate() {
                proptest::prop_assert_eq!(a, next);
                next = a + len;
                // Whole players: a slice starts at a player's first row.
                proptest::prop_assert!(a == 0 || pid[a] != pid[a - 1]);
                let players = 1 + (a + 1..next).filter(|&j| pid[j] != pid[j - 1]).count();
                proptest::prop_assert!(len <= max || players == 1, "{len} rows of {players}");
                // Greedy: the next player would not have fitted.
                if let Some(&(b, _)) = slices.get(i + 1) {
                    let end = (b + 1..pid.len()).find(|&j| pid[j] != pid[b]).unwrap_or(pid.len());
                    proptest::prop_assert!(end - a > max);
                }
            }
            proptest::prop_assert_eq!(next, pid.len());
            proptest::prop_assert!(!slices.is_empty());
        }
    }

    #[test]
    fn shards_and_buckets_cut_the_share_once() {
        let shards: Vec<Shard> = (0..4).map(|k| Shard { k, n: 4 }).collect();
        for i in 0..10_000 {
            let s = player_share(&format!("p{i}"));
            let owners: Vec<_> = shards.iter().filter_map(|sh| sh.bucket(s, 3)).collect();
            assert_eq!(owners.len(), 1, "share {s}");
            assert!(owners[0] < 3);
        }
        assert_eq!("3/8".parse::<Shard>().unwrap(), Shard { k: 3, n: 8 });
        assert_eq!(Shard::from_label("3-of-8"), Some(Shard { k: 3, n: 8 }));
        for bad in ["8/8", "1", "a/2", "1/0", "-1/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        // FNV-1a of "a" (0xaf63dc4c8601ec8c), top 53 bits.
        assert_eq!(
            player_share("a"),
            (0xaf63_dc4c_8601_ec8c_u64 >> 11) as f64 / (1u64 << 53) as f64
        );
    }
}
