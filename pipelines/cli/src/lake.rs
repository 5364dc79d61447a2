//! `mm lake show | optimize | vacuum | checkpoint | convert`.

use anyhow::Result;

use crate::args::{LakeCmd, Output};
use crate::output::emit;

pub fn run(cmd: &LakeCmd, out: &Output) -> Result<()> {
    match cmd {
        LakeCmd::Show(a) => {
            let lake = mm_lake::Lake::open_as_of(&a.lake, a.as_of.unwrap_or_default())?;
            if lake.version().is_none() {
                return Err(mm_lake::LakeError::Location {
                    location: lake.root().to_string(),
                    reason: "no lake here (no matches table)".into(),
                }
                .into());
            }
            let summary = mm_lake::summary::summarize(&lake, a.history)?;
            emit(out, &summary, |s| mm_run::out!("{s}"))
        }
        LakeCmd::Convert(a) => {
            let lake = mm_lake::Lake::convert_legacy(&a.lake)?;
            let summary = mm_lake::summary::summarize(&lake, a.history)?;
            emit(out, &summary, |s| {
                mm_run::out!("converted to Delta Lake\n{s}")
            })
        }
        LakeCmd::Optimize(a) => {
            let lake = mm_lake::Lake::open(&a.lake)?;
            let r = lake.optimize(a.min_files)?;
            emit(out, &r, |r| {
                mm_run::outln!(
                    "optimize {}: {} days compacted, {} files replaced by {} ({} rows); version {}",
                    lake.root(),
                    r.days_compacted,
                    r.files_removed,
                    r.files_added,
                    r.rows,
                    r.version.map_or("-".into(), |v| v.to_string())
                );
            })
        }
        LakeCmd::Checkpoint(a) => {
            let lake = mm_lake::Lake::open(&a.lake)?;
            let r = lake.checkpoint(a.expire_hours)?;
            emit(out, &r, |r| {
                let part = |t: Option<(i64, usize)>| {
                    t.map_or_else(
                        || "no table".to_string(),
                        |(v, n)| format!("checkpoint at version {v}, {n} log entries deleted"),
                    )
                };
                mm_run::outln!(
                    "checkpoint {}: matches {}; quarantine {}",
                    lake.root(),
                    part(r.matches),
                    part(r.quarantine)
                );
            })
        }
        LakeCmd::Vacuum(a) => {
            let lake = mm_lake::Lake::open(&a.lake)?;
            let r = lake.vacuum(a.retention_hours, a.full, a.dry_run, a.force)?;
            emit(out, &r, |r| {
                mm_run::outln!(
                    "vacuum {}{}: {} matches files, {} quarantine files {}",
                    lake.root(),
                    if a.dry_run { " (dry run)" } else { "" },
                    r.matches.len(),
                    r.quarantine.len(),
                    if a.dry_run {
                        "would be deleted"
                    } else {
                        "deleted"
                    }
                );
            })
        }
    }
}
