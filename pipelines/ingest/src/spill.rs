//! Staging between the passes: batches by day, kept in memory up to a row budget and spilled to
//! Arrow IPC files in the transaction's scratch directory beyond it, so memory stays flat however
//! large the input is (it is bounded by the budget and by the largest single day).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use arrow_array::RecordBatch;
use arrow_ipc::reader::FileReader;
use arrow_ipc::writer::FileWriter;
use mm_lake::staging_schema;

use crate::IngestError;

/// Staged batches, by day.
#[derive(Debug)]
pub struct DayStore {
    scratch: PathBuf,
    budget_rows: usize,
    mem: BTreeMap<i32, Vec<RecordBatch>>,
    mem_rows: usize,
    spilled: BTreeMap<i32, Vec<PathBuf>>,
    seq: u64,
    /// Rows written to spill files so far.
    pub spilled_rows: u64,
}

/// One day's staged rows, ready for pass 2.
#[derive(Debug)]
pub struct DayInput {
    pub day: i32,
    mem: Vec<RecordBatch>,
    files: Vec<PathBuf>,
}

fn spill_err(path: &std::path::Path, e: impl std::fmt::Display) -> IngestError {
    IngestError::Internal { path: path.to_path_buf(), reason: format!("spill file: {e}") }
}

impl DayStore {
    pub fn new(scratch: PathBuf, budget_rows: usize) -> DayStore {
        DayStore {
            scratch,
            budget_rows: budget_rows.max(1),
            mem: BTreeMap::new(),
            mem_rows: 0,
            spilled: BTreeMap::new(),
            seq: 0,
            spilled_rows: 0,
        }
    }

    pub fn add(&mut self, day: i32, batch: RecordBatch) -> Result<(), IngestError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.mem_rows += batch.num_rows();
        self.mem.entry(day).or_default().push(batch);
        if self.mem_rows > self.budget_rows {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<(), IngestError> {
        for (day, batches) in std::mem::take(&mut self.mem) {
            self.seq += 1;
            let path = self.scratch.join(format!("day{day}-{}.arrow", self.seq));
            let file = File::create(&path).map_err(|e| spill_err(&path, e))?;
            let mut w = FileWriter::try_new(BufWriter::with_capacity(1 << 20, file), &staging_schema())
                .map_err(|e| spill_err(&path, e))?;
            for b in &batches {
                w.write(b).map_err(|e| spill_err(&path, e))?;
                self.spilled_rows += b.num_rows() as u64;
            }
            w.finish().map_err(|e| spill_err(&path, e))?;
            self.spilled.entry(day).or_default().push(path);
        }
        self.mem_rows = 0;
        Ok(())
    }

    /// Every day with staged rows, in day order.
    pub fn into_days(mut self) -> Vec<DayInput> {
        let mut days: Vec<i32> = self.mem.keys().chain(self.spilled.keys()).copied().collect();
        days.sort_unstable();
        days.dedup();
        days.into_iter()
            .map(|day| DayInput {
                day,
                // spilled batches came first, so they go first: the order is the input order
                files: self.spilled.remove(&day).unwrap_or_default(),
                mem: self.mem.remove(&day).unwrap_or_default(),
            })
            .collect()
    }
}

impl DayInput {
    /// The day's batches in input order (reading back any spill files).
    pub fn load(self) -> Result<Vec<RecordBatch>, IngestError> {
        let mut out = Vec::new();
        for path in &self.files {
            let file = File::open(path).map_err(|e| spill_err(path, e))?;
            let reader = FileReader::try_new(file, None).map_err(|e| spill_err(path, e))?;
            for b in reader {
                out.push(b.map_err(|e| spill_err(path, e))?);
            }
        }
        out.extend(self.mem);
        Ok(out)
    }
}
