//! Round trips: the lake's own rows, written out by polars, pandas, DuckDB and pyarrow with
//! their default writers (CSV, JSON lines, Parquet; `tests/roundtrip/export.py`), ingest back
//! to the same rows, none quarantined.

use std::path::{Path, PathBuf};

use crate::util::{ingest, lake_rows_text, mm, python_with};

/// The columns that name the file a row was read from: they differ by design.
const PROVENANCE: [&str; 2] = ["source_file", "source_line"];

#[test]
fn lake_rows_written_by_python_engines_ingest_back_unchanged() {
    let Some(py) = python_with("polars, pandas, duckdb, pyarrow, deltalake") else {
        return;
    };
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
    let want = lake_rows_text(&lake, &PROVENANCE);
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
        let got = lake_rows_text(&back, &PROVENANCE);
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
