//! `mm ingest`: files (local or in a bucket) into the lake in one atomic run.

use anyhow::Result;

use crate::args::{IngestArgs, Output};

pub fn run(a: &IngestArgs, out: &Output) -> Result<()> {
    let cfg = a.to_config()?;
    let bar = crate::progress::Bar::new(out.quiet || out.json);
    let report = mm_ingest::ingest(&cfg, &bar)?;
    bar.finish();
    crate::output::emit(out, &report, |r| mm_run::out!("{}", r.summary()))
}
