//! Round trips: the lake's own rows, written out by polars, pandas, DuckDB and pyarrow with
//! their default writers (CSV, JSON lines, Parquet; `tests/roundtrip/export.py`), ingest back
//! to the same rows, none quarantined.

use std::path::{Path, PathBuf};

use arrow_cast::display::{ArrayFormatter, FormatOptions};

use crate::util::{ingest, mm, read_tree};

/// A Python with the engines: `MM_TEST_PYTHON`, else the venv `.ci/run` builds. As with the S3
/// server, CI (`MM_REQUIRE_S3`) fails the test when there is none instead of skipping it.
fn engines_python() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("MM_TEST_PYTHON").map(PathBuf::from),
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/mm-nb-venv/bin/python")),
    ];
    for py in candidates.into_iter().flatten() {
        let ok = std::process::Command::new(&py)
            .args(["-c", "import polars, pandas, duckdb, pyarrow, deltalake"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    assert!(
        std::env::var_os("MM_REQUIRE_S3").is_none(),
        "MM_REQUIRE_S3 is set but no Python with polars, pandas, duckdb, pyarrow and deltalake \
         was found (set MM_TEST_PYTHON; notebooks/requirements.txt pins them)"
    );
    eprintln!("skipping: no Python with polars, pandas, duckdb and pyarrow (set MM_TEST_PYTHON)");
    None
}

/// The lake's rows as text, every column but the provenance (which names the file read), sorted.
fn rows(lake: &Path) -> Vec<Vec<String>> {
    let opts = FormatOptions::default().with_null("<null>");
    let mut out = Vec::new();
    for b in read_tree(&lake.join("matches")) {
        let schema = b.schema();
        let cols: Vec<(String, ArrayFormatter)> = schema
            .fields()
            .iter()
            .zip(b.columns())
            .filter(|(f, _)| !["source_file", "source_line"].contains(&f.name().as_str()))
            .map(|(f, c)| (f.name().clone(), ArrayFormatter::try_new(c, &opts).unwrap()))
            .collect();
        for i in 0..b.num_rows() {
            out.push(
                cols.iter()
                    .map(|(name, f)| format!("{name}={}", f.value(i)))
                    .collect(),
            );
        }
    }
    out.sort();
    out
}

#[test]
fn lake_rows_written_by_python_engines_ingest_back_unchanged() {
    let Some(py) = engines_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let lake_s = lake.to_string_lossy().into_owned();
    // A small world with both modes: 1v1 rows without kills, 6v6 rows with every column.
    let (code, _, err) = mm(&[
        "simulate",
        "--lake",
        &lake_s,
        "--players",
        "300",
        "--days",
        "2",
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let want = rows(&lake);
    assert!(want.len() > 500, "{} rows", want.len());

    let out = dir.path().join("out");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/roundtrip/export.py");
    let o = std::process::Command::new(&py)
        .arg(&script)
        .arg(&lake)
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 11, "{files:?}");
    for f in &files {
        let back = dir
            .path()
            .join(format!("back-{}", f.file_name().unwrap().to_string_lossy()));
        let (code, report, err) = ingest(&back, &[f], &[]);
        assert_eq!(code, 0, "{}: {err}", f.display());
        assert_eq!(
            report["quarantine_entries_written"],
            0,
            "{}: rows quarantined: {report}",
            f.display()
        );
        let got = rows(&back);
        assert_eq!(got.len(), want.len(), "{}", f.display());
        let first_diff = got.iter().zip(&want).find(|(g, w)| g != w);
        assert!(
            first_diff.is_none(),
            "{}: a row came back different:\n got {:?}\nwant {:?}",
            f.display(),
            first_diff.map(|d| d.0),
            first_diff.map(|d| d.1)
        );
    }
}
