//! The churn feature build in shards through the binary: N = 4 `mm fit churn --shard K/4`
//! processes run at once on one table (a local directory, then a bucket of the S3 test server),
//! and the fit on their table writes exactly the feature table and the model of a single-process
//! run. A retried shard replaces its part; a missing shard stops the fit with a clear error.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::util::{self, mm};

const FIT: [&str; 10] = [
    "--mode",
    "tdm-6v6",
    "--c-grid",
    "0.01,1",
    "--folds",
    "2",
    "--history",
    "4",
    "--interactions",
    "2",
];

fn simulate(dir: &Path) -> String {
    let lake = dir.join("lake");
    let lake_s = lake.to_str().unwrap().to_string();
    let (code, _, err) = mm(&[
        "simulate",
        "--lake",
        &lake_s,
        "--players",
        "1500",
        "--days",
        "6",
        "--duel-share",
        "0",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    lake_s
}

/// `mm fit churn` on `lake` into `out` with the test's fit options.
fn churn_args(lake: &str, out: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "fit",
        "churn",
        "--lake",
        lake,
        "--out",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(FIT.map(String::from));
    args
}

fn fit(lake: &str, out: &Path, extra: &[&str], env: &[(&str, String)]) -> serde_json::Value {
    let mut args = churn_args(lake, out);
    args.extend(extra.iter().map(|s| (*s).to_string()));
    args.push("--json".into());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, err) = util::mm_env(&a, env);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&stdout).unwrap()
}

/// Starts shard `k` of `n` (chunks of 2,000 rows: several buckets per shard): `--shard K/N`,
/// or as a Kubernetes Indexed Job runs it when `env` sets `JOB_COMPLETION_INDEX`
/// (`--shards N`, K from the variable).
fn spawn_shard(
    lake: &str,
    out: &Path,
    tables: &str,
    k: u32,
    n: u32,
    env: &[(&str, String)],
) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mm"));
    let indexed = env.iter().any(|(key, _)| *key == "JOB_COMPLETION_INDEX");
    let (flag, shard) = if indexed {
        ("--shards", n.to_string())
    } else {
        ("--shard", format!("{k}/{n}"))
    };
    cmd.args(churn_args(lake, out))
        .args([
            "--tables",
            tables,
            flag,
            &shard,
            "--chunk-rows",
            "2000",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, v) in env {
        cmd.env(key, v);
    }
    if indexed {
        cmd.env("JOB_COMPLETION_INDEX", k.to_string());
    }
    cmd.spawn().unwrap()
}

/// Runs shards `0..n` of `n` at once; their reports.
fn run_shards(
    lake: &str,
    out: &Path,
    tables: &str,
    n: u32,
    env: &[(&str, String)],
) -> Vec<serde_json::Value> {
    let children: Vec<_> = (0..n)
        .map(|k| spawn_shard(lake, out, tables, k, n, env))
        .collect();
    children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            serde_json::from_slice(&o.stdout).unwrap()
        })
        .collect()
}

/// A string column as strings, whichever of arrow's string types the writer chose.
fn strings(c: &dyn Array) -> Vec<String> {
    if let Some(s) = c.as_string_view_opt() {
        s.iter().map(|v| v.unwrap_or("").to_string()).collect()
    } else if let Some(s) = c.as_string_opt::<i64>() {
        s.iter().map(|v| v.unwrap_or("").to_string()).collect()
    } else {
        let s = c.as_string::<i32>();
        s.iter().map(|v| v.unwrap_or("").to_string()).collect()
    }
}

/// The rows of a Parquet file by (player, match), each as its cells.
type Rows = HashMap<(String, String), Vec<ArrayRef>>;

fn table(p: &Path) -> (Vec<String>, Rows) {
    let f = std::fs::File::open(p).unwrap();
    let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let names: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mut rows = HashMap::new();
    for b in &batches {
        let pid = strings(b.column_by_name("player_id").unwrap());
        let mid = strings(b.column_by_name("match_id").unwrap());
        for i in 0..b.num_rows() {
            let cells = b.columns().iter().map(|c| c.slice(i, 1)).collect();
            let key = (pid[i].clone(), mid[i].clone());
            assert!(
                rows.insert(key.clone(), cells).is_none(),
                "duplicate row {key:?}"
            );
        }
    }
    (names, rows)
}

fn assert_same_table(a: &Path, b: &Path) {
    let (na, ra) = table(a);
    let (nb, rb) = table(b);
    assert_eq!(na, nb);
    assert_eq!(ra.len(), rb.len(), "row counts");
    for (k, cells) in &ra {
        let other = rb.get(k).unwrap_or_else(|| panic!("row {k:?} missing"));
        for ((name, x), y) in na.iter().zip(cells).zip(other) {
            assert!(
                x.as_ref() == y.as_ref(),
                "row {k:?}, column {name}: {x:?} vs {y:?}"
            );
        }
    }
}

fn model(out: &Path) -> serde_json::Value {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("churn_model.json")).unwrap()).unwrap();
    m["model"].clone()
}

#[test]
fn four_concurrent_shards_make_the_single_process_table_and_model() {
    let dir = tempfile::tempdir().unwrap();
    let lake = simulate(dir.path());
    // The reference: one process builds the whole table (one shard, one bucket) and fits.
    let single = dir.path().join("single");
    let r1 = fit(&lake, &single, &[], &[]);
    assert_eq!(r1["build"]["shards"], 1, "{}", r1["build"]);
    assert_eq!(r1["build"]["reused"], false);

    // Four shard processes at once on one local table, then the fit on their table.
    let sharded = dir.path().join("sharded");
    let tables = dir.path().join("tables");
    let tables_s = tables.to_str().unwrap();
    let reports = run_shards(&lake, &sharded, tables_s, 4, &[]);
    let rows: u64 = reports
        .iter()
        .map(|r| r["stats"]["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(rows, r1["rows"].as_u64().unwrap());
    assert!(
        reports
            .iter()
            .all(|r| r["stats"]["buckets"].as_u64().unwrap() > 1)
    );
    let r4 = fit(&lake, &sharded, &["--tables", tables_s], &[]);
    assert_eq!(r4["build"]["shards"], 4, "{}", r4["build"]);
    assert_eq!(r4["build"]["reused"], true);
    assert_eq!(r4["build"]["key"], r1["build"]["key"]);
    assert_same_table(
        &single.join("churn_features.parquet"),
        &sharded.join("churn_features.parquet"),
    );
    assert_eq!(model(&single), model(&sharded), "the fitted models differ");
    assert_eq!(r4["auc"], r1["auc"]);

    // A retried shard replaces its part (no duplicated rows, the same table and model).
    let again = run_shards_one(&lake, &sharded, tables_s, 2, 4);
    assert!(again["features_version"].as_i64() > r4["build"]["features_version"].as_i64());
    let refit = dir.path().join("refit");
    let r5 = fit(&lake, &refit, &["--tables", tables_s], &[]);
    assert_eq!(r5["rows"], r1["rows"]);
    assert_same_table(
        &single.join("churn_features.parquet"),
        &refit.join("churn_features.parquet"),
    );
    assert_eq!(model(&single), model(&refit));

    // Another option set (horizon 1d) with one of three shards committed: the fit refuses,
    // naming the missing shards, until --rebuild.
    let mut args = churn_args(&lake, &dir.path().join("partial"));
    args.extend(["--tables", tables_s, "--horizon", "1d"].map(String::from));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = mm(&[&a[..], &["--shard", "1/3"]].concat());
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = mm(&a);
    assert_ne!(code, 0);
    assert!(err.contains("shards 0, 2 of 3 not committed"), "{err}");
    let (code, _, err) = mm(&[&a[..], &["--rebuild"]].concat());
    assert_eq!(code, 0, "{err}");

    // The default tables (`<out>/tables`) keep one build: another option set replaces it.
    let builds = |out: &Path| {
        std::fs::read_dir(out.join("tables/features"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("build="))
            .count()
    };
    assert_eq!(builds(&single), 1);
    let r6 = fit(&lake, &single, &["--horizon", "1d"], &[]);
    assert_ne!(r6["build"]["key"], r1["build"]["key"]);
    assert_eq!(builds(&single), 1);
}

fn run_shards_one(lake: &str, out: &Path, tables: &str, k: u32, n: u32) -> serde_json::Value {
    let o = spawn_shard(lake, out, tables, k, n, &[])
        .wait_with_output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn four_concurrent_shards_on_an_s3_bucket_make_the_single_process_table() {
    let Some(py) = util::moto_python() else {
        return;
    };
    let server = util::S3Server::start(&py);
    server.create_bucket("tables");
    let env = server.env();
    let dir = tempfile::tempdir().unwrap();
    let lake = simulate(dir.path());
    let single = dir.path().join("single");
    fit(&lake, &single, &[], &[]);
    let sharded = dir.path().join("sharded");
    let tables = "s3://tables/churn";
    // The shards' and the fit's caches of the remote table live in the test's folder.
    let mut env = env;
    env.push((
        "MM_CACHE",
        dir.path().join("cache").to_str().unwrap().into(),
    ));
    // As an Indexed Job runs them: `--shards 4`, the index from JOB_COMPLETION_INDEX.
    let mut shard_env = env.clone();
    shard_env.push(("JOB_COMPLETION_INDEX", String::new()));
    run_shards(&lake, &sharded, tables, 4, &shard_env);
    let keys = server.list("tables");
    assert!(
        keys.iter()
            .any(|k| k.starts_with("churn/features/_delta_log/"))
            && keys.iter().any(|k| k.contains("/shard=3-of-4/")),
        "{keys:?}"
    );
    let r = fit(&lake, &sharded, &["--tables", tables], &env);
    assert_eq!(r["build"]["shards"], 4, "{}", r["build"]);
    assert_same_table(
        &single.join("churn_features.parquet"),
        &sharded.join("churn_features.parquet"),
    );
    assert_eq!(model(&single), model(&sharded));
}
