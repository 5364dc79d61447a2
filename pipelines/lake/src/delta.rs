//! The lake's tables as Delta Lake tables, through delta-rs (`deltalake-core`).
//!
//! delta-rs owns the table format: the log, snapshots, time travel, conditional commits
//! (put-if-absent on every object store it supports; S3 through its conditional writes), history
//! and vacuum. This module is the thin, synchronous layer the rest of the pipeline calls: it
//! opens a table at a version or time, lists a snapshot's files, and commits actions with
//! optimistic concurrency, re-checking what a concurrent winner committed before retrying.

use std::collections::HashMap;
use std::future::{Future, IntoFuture};
use std::sync::{LazyLock, Once};

use arrow_schema::{DataType as ArrowType, Schema as ArrowSchema};
use deltalake_core::kernel::transaction::{CommitBuilder, CommitProperties, TransactionError};
use deltalake_core::kernel::{Action, DataType, StructField};
use deltalake_core::logstore::LogStoreRef;
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use serde_json::Value;

use crate::error::{LakeError, Result, io_err};
use crate::location::Location;

/// The key of the run record in a commit's `commitInfo`.
pub const RUN_KEY: &str = "mm_run";

/// The highest Delta protocol versions `mm` honours: it reads tables of reader version 1 (no
/// column mapping, no deletion vectors) and writes tables of writer version 2 (append-only and
/// invariants; no check constraints, change data feed, generated or identity columns).
pub const MAX_READER_VERSION: i32 = 1;
pub const MAX_WRITER_VERSION: i32 = 2;

/// How many times a commit is re-checked and retried against concurrent winners.
const MAX_ATTEMPTS: usize = 64;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("mm-lake-io")
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot start the lake's I/O runtime: {e}"))
});

/// A table's version as `mm` reports it (Delta versions are small non-negative integers).
pub(crate) fn version_of(t: &DeltaTable) -> Option<i64> {
    t.version().and_then(|v| i64::try_from(v).ok())
}

/// Runs a delta-rs future to completion on the lake's I/O runtime.
pub(crate) fn block_on<F: Future + Send>(f: F) -> F::Output
where
    F::Output: Send,
{
    register_stores();
    // A caller already inside a runtime (a test harness, a service) must not block its thread.
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| {
            s.spawn(|| RUNTIME.block_on(f))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    } else {
        RUNTIME.block_on(f)
    }
}

/// Registers the object stores delta-rs does not know by itself (S3, GCS, Azure).
pub(crate) fn register_stores() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        deltalake_aws::register_handlers(None);
        deltalake_gcp::register_handlers(None);
        deltalake_azure::register_handlers(None);
    });
}

/// Which snapshot of a table to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AsOf {
    #[default]
    Latest,
    /// A table version (the `N` of `_delta_log/000…N.json`).
    Version(i64),
    /// The latest version committed at or before this time (milliseconds since the epoch, UTC).
    Time(i64),
}

impl std::str::FromStr for AsOf {
    type Err = String;
    /// `17` (a version), `2024-01-07T12:00:00Z` (RFC 3339) or `2024-01-07` (midnight UTC).
    fn from_str(s: &str) -> std::result::Result<AsOf, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("latest") {
            return Ok(AsOf::Latest);
        }
        if let Ok(v) = s.parse::<i64>() {
            return if v >= 0 {
                Ok(AsOf::Version(v))
            } else {
                Err(format!("{s}: a table version is 0 or more"))
            };
        }
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
            return Ok(AsOf::Time(t.timestamp_millis()));
        }
        if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
            && let Some(t) = d.and_hms_opt(23, 59, 59)
        {
            return Ok(AsOf::Time(t.and_utc().timestamp_millis() + 999));
        }
        Err(format!(
            "{s}: expected a table version (17), a time (2024-01-07T12:00:00Z) or a day \
             (2024-01-07, meaning its end)"
        ))
    }
}

pub(crate) fn delta_err(loc: &Location) -> impl Fn(DeltaTableError) -> LakeError + '_ {
    move |source| LakeError::from_delta(loc, source)
}

fn builder(loc: &Location) -> Result<DeltaTableBuilder> {
    register_stores();
    DeltaTableBuilder::from_url(loc.url()?).map_err(delta_err(loc))
}

/// The object store rooted at `loc` (a table's or any prefix's), as delta-rs configures it.
pub(crate) fn object_store(
    loc: &Location,
) -> Result<std::sync::Arc<dyn object_store::ObjectStore>> {
    let log_store = builder(loc)?.build_storage().map_err(delta_err(loc))?;
    Ok(log_store.object_store(None))
}

/// Opens the table at `loc` as of `as_of`; `None` when no table exists there yet (and `as_of`
/// is [`AsOf::Latest`]).
pub(crate) fn open_table(loc: &Location, as_of: AsOf) -> Result<Option<DeltaTable>> {
    if let Some(dir) = loc.local()
        && !dir.join("_delta_log").is_dir()
    {
        return match as_of {
            AsOf::Latest => Ok(None),
            _ => Err(LakeError::Location {
                location: loc.to_string(),
                reason: "no Delta table here".into(),
            }),
        };
    }
    let b = builder(loc)?;
    let b = match as_of {
        AsOf::Latest => b,
        AsOf::Version(v) => b.with_version(u64::try_from(v).unwrap_or(0)),
        AsOf::Time(ms) => {
            b.with_timestamp(chrono::DateTime::from_timestamp_millis(ms).ok_or_else(|| {
                LakeError::Location {
                    location: loc.to_string(),
                    reason: format!("{ms}: not a time"),
                }
            })?)
        }
    };
    let mut table = b.build().map_err(delta_err(loc))?;
    let loaded = block_on(async {
        match as_of {
            AsOf::Latest => table.load().await,
            AsOf::Version(v) => table.load_version(u64::try_from(v).unwrap_or(0)).await,
            AsOf::Time(ms) => {
                let t = chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
                table.load_with_datetime(t).await
            }
        }
    });
    match loaded {
        Ok(()) => {
            check_protocol(loc, &table, false)?;
            Ok(Some(table))
        }
        Err(DeltaTableError::NotATable(_)) if as_of == AsOf::Latest => {
            // A reachable location with no table yet. An unreachable one fails here instead.
            probe(loc, &table)?;
            Ok(None)
        }
        // A version or time the table cannot give is the request's fault.
        Err(e) if as_of != AsOf::Latest => Err(LakeError::Location {
            location: loc.to_string(),
            reason: format!("cannot read the table as of {as_of:?}: {e}"),
        }),
        Err(e) => {
            // Storage that cannot be listed (no bucket, refused credentials) is named as such.
            probe(loc, &table)?;
            Err(LakeError::from_delta(loc, e))
        }
    }
}

/// Lists the location once, so that a missing bucket or bad credentials fail on open with the
/// store's own message, not later as "no table".
fn probe(loc: &Location, table: &DeltaTable) -> Result<()> {
    use futures::StreamExt;
    let store = table.log_store().object_store(None);
    block_on(async move {
        let mut list = store.list(None);
        match list.next().await {
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        }
    })
    .map_err(|e| LakeError::Location {
        location: loc.to_string(),
        reason: crate::error::store_reason(&e),
    })
}

/// Refuses a table whose protocol asks more of its readers (or writers) than `mm` provides.
pub(crate) fn check_protocol(loc: &Location, table: &DeltaTable, write: bool) -> Result<()> {
    let snap = table.snapshot().map_err(delta_err(loc))?;
    let p = snap.protocol();
    let (r, w) = (p.min_reader_version(), p.min_writer_version());
    if r > MAX_READER_VERSION || (write && w > MAX_WRITER_VERSION) {
        return Err(LakeError::Protocol {
            location: loc.to_string(),
            reason: format!(
                "the table needs Delta reader version {r} and writer version {w} (reader \
                 features {:?}, writer features {:?}); mm reads up to reader version \
                 {MAX_READER_VERSION} and writes up to writer version {MAX_WRITER_VERSION}",
                p.reader_features().unwrap_or_default(),
                p.writer_features().unwrap_or_default()
            ),
        });
    }
    Ok(())
}

/// The Delta type of one of our Arrow column types.
fn delta_type(t: &ArrowType) -> Option<DataType> {
    Some(match t {
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => DataType::STRING,
        ArrowType::Dictionary(_, v) if matches!(**v, ArrowType::Utf8) => DataType::STRING,
        ArrowType::Int64 => DataType::LONG,
        ArrowType::Int32 => DataType::INTEGER,
        ArrowType::Float64 => DataType::DOUBLE,
        ArrowType::Float32 => DataType::FLOAT,
        ArrowType::Boolean => DataType::BOOLEAN,
        ArrowType::Timestamp(_, Some(_)) => DataType::TIMESTAMP,
        ArrowType::Date32 => DataType::DATE,
        _ => return None,
    })
}

/// Creates the table at `loc` with the columns of `schema`, partitioned by `partitions` (columns
/// not stored in the files, with their Delta types), or loads it when another writer created it
/// first.
pub(crate) fn create_table(
    loc: &Location,
    name: &str,
    schema: &ArrowSchema,
    partitions: &[(&str, DataType)],
) -> Result<DeltaTable> {
    let mut cols = Vec::new();
    for f in schema.fields() {
        let t = delta_type(f.data_type()).ok_or_else(|| LakeError::Location {
            location: loc.to_string(),
            reason: format!("column {} has no Delta type ({})", f.name(), f.data_type()),
        })?;
        cols.push(StructField::new(f.name().clone(), t, f.is_nullable()));
    }
    for (p, t) in partitions {
        cols.push(StructField::new((*p).to_string(), t.clone(), false));
    }
    if let Some(dir) = loc.local() {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    let table = builder(loc)?.build().map_err(delta_err(loc))?;
    let mut create = table
        .create()
        .with_table_name(name)
        .with_columns(cols)
        .with_save_mode(SaveMode::ErrorIfExists);
    if !partitions.is_empty() {
        create = create.with_partition_columns(partitions.iter().map(|(p, _)| *p));
    }
    match block_on(create.into_future()) {
        Ok(t) => Ok(t),
        // Another writer created it between our look and our commit: use theirs.
        Err(_) if open_table(loc, AsOf::Latest)?.is_some() => open_table(loc, AsOf::Latest)?
            .ok_or_else(|| LakeError::Location {
                location: loc.to_string(),
                reason: "the table vanished while it was being created".into(),
            }),
        Err(e) => Err(LakeError::from_delta(loc, e)),
    }
}

/// Adds to the table at `loc` the nullable columns of `schema` that it does not have yet (a
/// table created by an older `mm`), as one `ADD COLUMNS` commit. Files written before keep
/// reading as null in those columns. A concurrent writer that added them first is fine.
pub(crate) fn add_missing_columns(loc: &Location, schema: &ArrowSchema) -> Result<()> {
    let Some(table) = open_table(loc, AsOf::Latest)? else {
        return Ok(());
    };
    let have = table.snapshot().map_err(delta_err(loc))?.schema();
    let mut missing = Vec::new();
    for f in schema.fields() {
        if have.field(f.name()).is_none() && f.is_nullable() {
            let t = delta_type(f.data_type()).ok_or_else(|| LakeError::Location {
                location: loc.to_string(),
                reason: format!("column {} has no Delta type ({})", f.name(), f.data_type()),
            })?;
            missing.push(StructField::new(f.name().clone(), t, true));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    check_protocol(loc, &table, true)?;
    let names: Vec<String> = missing.iter().map(|f| f.name().clone()).collect();
    match block_on(table.add_columns().with_fields(missing).into_future()) {
        Ok(_) => {
            tracing::info!(table = %loc, columns = ?names, "added the lake's new columns to the table");
            Ok(())
        }
        // Another writer added them between our look and our commit.
        Err(_)
            if open_table(loc, AsOf::Latest)?
                .and_then(|t| t.snapshot().ok().map(|s| s.schema()))
                .is_some_and(|s| names.iter().all(|n| s.field(n).is_some())) =>
        {
            Ok(())
        }
        Err(e) => Err(LakeError::from_delta(loc, e)),
    }
}

/// A file a commit added with `dataChange: true`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AddedFile {
    /// Relative to the table, as the log records it (URL-encoded).
    pub path: String,
    pub partition_values: HashMap<String, Option<String>>,
    pub size: u64,
    /// `numRecords` from the add's statistics, when present.
    pub rows: Option<u64>,
}

/// What a commit did, as read from its log entry: a concurrent winner's, for the re-check of a
/// losing commit, or any commit after a version ([`crate::changes`]).
#[derive(Debug, Default, Clone)]
pub struct WinnerCommit {
    pub version: i64,
    /// Files it added with `dataChange: true` (compactions add files without new data).
    pub added: Vec<AddedFile>,
    /// Files it removed.
    pub removed: Vec<String>,
    pub operation: Option<String>,
    /// The run id it recorded, if it was an `mm` run.
    pub run_id: Option<String>,
    /// The application transactions it recorded: (app id, version).
    pub app_transactions: Vec<(String, i64)>,
}

pub(crate) fn parse_commit(version: i64, bytes: &[u8]) -> WinnerCommit {
    let mut w = WinnerCommit {
        version,
        ..Default::default()
    };
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if let Some(a) = v.get("add") {
            let data_change = a.get("dataChange").and_then(Value::as_bool).unwrap_or(true);
            if let (Some(p), true) = (a.get("path").and_then(Value::as_str), data_change) {
                w.added.push(AddedFile {
                    path: p.to_string(),
                    partition_values: a
                        .get("partitionValues")
                        .and_then(|x| serde_json::from_value(x.clone()).ok())
                        .unwrap_or_default(),
                    size: a.get("size").and_then(Value::as_u64).unwrap_or(0),
                    rows: a
                        .get("stats")
                        .and_then(Value::as_str)
                        .and_then(|s| serde_json::from_str::<Value>(s).ok())
                        .and_then(|s| s.get("numRecords").and_then(Value::as_u64)),
                });
            }
        } else if let Some(r) = v.get("remove") {
            if let Some(p) = r.get("path").and_then(Value::as_str) {
                w.removed.push(p.to_string());
            }
        } else if let Some(t) = v.get("txn") {
            if let (Some(app), Some(ver)) = (
                t.get("appId").and_then(Value::as_str),
                t.get("version").and_then(Value::as_i64),
            ) {
                w.app_transactions.push((app.to_string(), ver));
            }
        } else if let Some(ci) = v.get("commitInfo") {
            w.operation = ci
                .get("operation")
                .and_then(Value::as_str)
                .map(str::to_string);
            w.run_id = ci
                .get(RUN_KEY)
                .and_then(|r| r.get("run_id"))
                .and_then(Value::as_str)
                .map(str::to_string);
        }
    }
    w
}

/// Commits `actions` on top of the loaded snapshot of `table`. When other writers committed
/// since, `recheck` sees each of their commits, oldest first; if it accepts them all the commit
/// is retried on the new snapshot, and if it refuses one, its error is returned and nothing is
/// committed. Returns the committed version.
pub(crate) fn commit(
    loc: &Location,
    table: &mut DeltaTable,
    actions: Vec<Action>,
    operation: DeltaOperation,
    metadata: HashMap<String, Value>,
    recheck: &mut dyn FnMut(&WinnerCommit) -> Result<()>,
) -> Result<i64> {
    check_protocol(loc, table, true)?;
    let log_store: LogStoreRef = table.log_store();
    for _ in 0..MAX_ATTEMPTS {
        let snapshot = table.snapshot().map_err(delta_err(loc))?;
        let read_version = snapshot.version();
        let props = CommitProperties::default()
            .with_metadata(metadata.clone())
            .with_max_retries(0)
            .with_create_checkpoint(true);
        let attempt = block_on(
            CommitBuilder::from(props)
                .with_actions(actions.clone())
                .build(Some(snapshot), log_store.clone(), operation.clone())
                .into_future(),
        );
        match attempt {
            Ok(done) => {
                // The commit's own snapshot (the read one with this commit's actions, built by
                // its post-commit step), as delta-rs's operations keep it: reading the log again
                // would parse every file's statistics a second time.
                let version = done.version();
                table.state = Some(done.snapshot());
                return Ok(i64::try_from(version).unwrap_or(i64::MAX));
            }
            Err(e) if is_conflict(&e) => {
                let latest =
                    block_on(log_store.get_latest_version(read_version)).map_err(delta_err(loc))?;
                for v in read_version + 1..=latest {
                    let bytes = block_on(log_store.read_commit_entry(v))
                        .map_err(delta_err(loc))?
                        .unwrap_or_default();
                    recheck(&parse_commit(i64::try_from(v).unwrap_or(i64::MAX), &bytes))?;
                }
                block_on(table.update_incremental(Some(latest))).map_err(delta_err(loc))?;
            }
            Err(e) => return Err(LakeError::from_delta(loc, e)),
        }
    }
    Err(LakeError::Conflict {
        location: loc.to_string(),
        reason: format!("gave up after {MAX_ATTEMPTS} attempts: other writers keep committing"),
    })
}

fn is_conflict(e: &DeltaTableError) -> bool {
    matches!(
        e,
        DeltaTableError::VersionAlreadyExists(_)
            | DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_)
                    | TransactionError::VersionAlreadyExists(_)
            }
    )
}

/// Uploads a staged file: one request up to 32 MiB, a multipart upload above. Data files are
/// created only if absent (`create_only`), so no run ever replaces another's file.
pub(crate) fn upload(
    store: std::sync::Arc<dyn object_store::ObjectStore>,
    staged: &std::path::Path,
    rel: &str,
    create_only: bool,
) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use object_store::{ObjectStoreExt as _, PutMode, PutOptions, PutPayload, WriteMultipart};
    const ONE_REQUEST: u64 = 32 << 20;
    let path = object_store::path::Path::from(rel);
    let len = std::fs::metadata(staged)?.len();
    if len <= ONE_REQUEST {
        let bytes = bytes::Bytes::from(std::fs::read(staged)?);
        let opts = PutOptions {
            mode: if create_only {
                PutMode::Create
            } else {
                PutMode::Overwrite
            },
            ..Default::default()
        };
        block_on(async move { store.put_opts(&path, PutPayload::from(bytes), opts).await })?;
        return Ok(());
    }
    let staged = staged.to_path_buf();
    block_on(async move {
        use std::io::Read;
        let upload = store.put_multipart(&path).await?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, 16 << 20);
        let mut f = std::fs::File::open(&staged)?;
        let mut buf = vec![0u8; 8 << 20];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            w.wait_for_capacity(4).await?;
            w.write(&buf[..n]);
        }
        w.finish().await?;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    })
}

/// The add action of a published file with these partition values: its row count and, when it
/// has a `start_time` column, that column's range as statistics (read from the staged file's
/// footer), so engines can skip files by time.
pub(crate) fn add_action(
    staged: &std::path::Path,
    rel: &str,
    partition_values: HashMap<String, Option<String>>,
) -> Result<deltalake_core::kernel::Add> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::statistics::Statistics;
    let file = std::fs::File::open(staged).map_err(io_err(staged))?;
    let size = file.metadata().map_err(io_err(staged))?.len();
    let reader = SerializedFileReader::new(file).map_err(|source| LakeError::Parquet {
        path: staged.to_path_buf(),
        source,
    })?;
    let meta = reader.metadata();
    let rows = meta.file_metadata().num_rows();
    let mut stats = serde_json::json!({ "numRecords": rows });
    let schema = meta.file_metadata().schema_descr();
    if let Some(k) = (0..schema.num_columns()).find(|&k| schema.column(k).name() == "start_time") {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        let mut complete = meta.num_row_groups() > 0;
        for rg in meta.row_groups() {
            match rg.column(k).statistics() {
                Some(Statistics::Int64(s)) => match (s.min_opt(), s.max_opt()) {
                    (Some(a), Some(b)) => {
                        lo = lo.min(*a);
                        hi = hi.max(*b);
                    }
                    _ => complete = false,
                },
                _ => complete = false,
            }
        }
        let iso = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        };
        if complete && let (Some(a), Some(b)) = (iso(lo), iso(hi)) {
            stats["minValues"] = serde_json::json!({ "start_time": a });
            stats["maxValues"] = serde_json::json!({ "start_time": b });
            stats["nullCount"] = serde_json::json!({ "start_time": 0 });
        }
    }
    // The mode's range and the rows without kills: a job that counts rows by mode and metric
    // (`mm retrain`'s choice of modes) reads them from the log instead of the file.
    let column = |name: &str| (0..schema.num_columns()).find(|&k| schema.column(k).name() == name);
    if let Some(k) = column("mode") {
        let mut range: Option<(String, String)> = None;
        let mut complete = meta.num_row_groups() > 0;
        for rg in meta.row_groups() {
            match rg.column(k).statistics() {
                Some(Statistics::ByteArray(s)) if s.null_count_opt() == Some(0) => {
                    let text = |v: Option<&parquet::data_type::ByteArray>| {
                        v.and_then(|v| v.as_utf8().ok()).map(str::to_string)
                    };
                    match (text(s.min_opt()), text(s.max_opt())) {
                        (Some(a), Some(b)) => {
                            range = Some(match range {
                                Some((lo, hi)) => (lo.min(a), hi.max(b)),
                                None => (a, b),
                            });
                        }
                        _ => complete = false,
                    }
                }
                _ => complete = false,
            }
        }
        if complete && let Some((a, b)) = range {
            stats["minValues"]["mode"] = serde_json::json!(a);
            stats["maxValues"]["mode"] = serde_json::json!(b);
            stats["nullCount"]["mode"] = serde_json::json!(0);
        }
    }
    if let Some(k) = column("kills") {
        let nulls: Option<u64> = meta
            .row_groups()
            .iter()
            .map(|rg| rg.column(k).statistics().and_then(|s| s.null_count_opt()))
            .sum();
        if let Some(n) = nulls.filter(|_| meta.num_row_groups() > 0) {
            stats["nullCount"]["kills"] = serde_json::json!(n);
        }
    }
    Ok(deltalake_core::kernel::Add {
        path: rel.to_string(),
        partition_values,
        size: i64::try_from(size).unwrap_or(i64::MAX),
        modification_time: chrono::Utc::now().timestamp_millis(),
        data_change: true,
        stats: Some(stats.to_string()),
        ..Default::default()
    })
}
