//! Lakes of the layout before Delta Lake, converted in place, and the data files of a table.

use std::collections::HashMap;
use std::fs::{self};
use std::path::{Path, PathBuf};

use crate::delta::RUN_KEY;
use crate::delta::{self, AsOf};
use crate::error::{LakeError, Result, io_err};
use crate::location::Location;
use crate::store::{DAY, Lake, MATCHES_DIR, QUARANTINE_DIR, TableView, is_legacy};
use crate::txn::add_action;

/// Local paths of the data files of the Delta table at `loc` (its latest snapshot), in
/// partition and name order: what an engine reads, never a directory listing.
pub fn table_files(loc: &Path) -> Result<Vec<PathBuf>> {
    let view = TableView::open(Location::from_path(loc)?, AsOf::Latest)?;
    view.files
        .iter()
        .map(|f| view.local_file(&f.path))
        .collect()
}

impl Lake {
    /// Converts a lake of the layout before Delta in place: its Parquet files become the first
    /// version of the `matches` and `quarantine` tables (as Delta's CONVERT TO DELTA does), one
    /// commit each, and its `_runs/` records go into the matches commit. No data file is
    /// rewritten or moved. Returns the converted lake.
    pub fn convert_legacy(root: impl AsRef<Path>) -> Result<Lake> {
        let loc = Location::from_path(root.as_ref())?;
        if !is_legacy(&loc) {
            return Err(LakeError::Location {
                location: loc.to_string(),
                reason: "not a lake of the layout before Delta Lake (no _runs/, or already a \
                         Delta table)"
                    .into(),
            });
        }
        let dir = loc.local().unwrap_or(Path::new(".")).to_path_buf();
        let mut runs = Vec::new();
        if let Ok(rd) = fs::read_dir(dir.join("_runs")) {
            let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths {
                let text = fs::read_to_string(&p).map_err(io_err(&p))?;
                runs.push(
                    serde_json::from_str::<serde_json::Value>(&text).map_err(|e| {
                        LakeError::Corrupt {
                            path: p.clone(),
                            reason: e.to_string(),
                        }
                    })?,
                );
            }
        }
        for (table, schema, partition) in [
            (
                MATCHES_DIR,
                crate::schema::matches_schema(),
                vec![(DAY, deltalake_core::kernel::DataType::DATE)],
            ),
            (QUARANTINE_DIR, crate::schema::quarantine_schema(), vec![]),
        ] {
            let tdir = dir.join(table);
            let mut files = Vec::new();
            crate::mirror::walk(&tdir, &tdir, &mut files)?;
            files.retain(|f| f.ends_with(".parquet"));
            files.sort();
            let tloc = loc.join(table);
            let mut t = delta::create_table(&tloc, table, &schema, &partition)?;
            let actions = files
                .iter()
                .map(|rel| {
                    add_action(&tdir.join(rel), rel).map(deltalake_core::kernel::Action::Add)
                })
                .collect::<Result<Vec<_>>>()?;
            let mut meta = HashMap::new();
            meta.insert(
                RUN_KEY.to_string(),
                serde_json::json!({"run_id": "convert", "kind": "convert", "runs_before": runs}),
            );
            let op = deltalake_core::protocol::DeltaOperation::Write {
                mode: deltalake_core::protocol::SaveMode::Append,
                partition_by: (!partition.is_empty())
                    .then(|| partition.iter().map(|(p, _)| (*p).to_string()).collect()),
                predicate: None,
            };
            delta::commit(&tloc, &mut t, actions, op, meta, &mut |_| Ok(()))?;
        }
        let old = dir.join("_runs");
        fs::rename(&old, dir.join("_runs.converted")).map_err(io_err(&old))?;
        let _ = fs::remove_file(dir.join("_lock"));
        Lake::open(&dir)
    }
}
