//! Numeric tables in Parquet: a feature matrix with a label column, read into a row-major
//! `f64` matrix (any integer, float or boolean column is widened) and written back.

use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{ArrayRef, Float64Array};
use arrow_schema::DataType;
use ndarray::Array2;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A feature table: named columns, rows, and a boolean label.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub names: Vec<String>,
    pub x: Array2<f64>,
    pub y: Vec<bool>,
}

/// Why a table could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Format { path: String, message: String },
}

fn fmt_err(path: &Path, message: impl std::fmt::Display) -> TableError {
    TableError::Format {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

fn is_numeric(t: &DataType) -> bool {
    t.is_numeric() || *t == DataType::Boolean
}

/// Reads every numeric column but `label` as a feature (file order) and `label` (0/1 integers or
/// booleans) as the target. A null or non-finite value is an error naming its column and row.
pub fn read_table(path: &Path, label: &str) -> Result<Table, TableError> {
    let file = File::open(path).map_err(|source| TableError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| fmt_err(path, e))?;
    let schema = builder.schema().clone();
    let rows = usize::try_from(builder.metadata().file_metadata().num_rows())
        .map_err(|e| fmt_err(path, e))?;
    let label_idx = schema
        .index_of(label)
        .map_err(|_| fmt_err(path, format!("no label column `{label}`")))?;
    let feats: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| i != label_idx && is_numeric(schema.field(i).data_type()))
        .collect();
    let names: Vec<String> = feats
        .iter()
        .map(|&i| schema.field(i).name().clone())
        .collect();
    let reader = builder
        .with_batch_size(65_536)
        .build()
        .map_err(|e| fmt_err(path, e))?;
    let mut x = Array2::<f64>::zeros((rows, feats.len()));
    let mut y = Vec::with_capacity(rows);
    let mut at = 0usize;
    for batch in reader {
        let batch = batch.map_err(|e| fmt_err(path, e))?;
        let n = batch.num_rows();
        if at + n > rows {
            return Err(fmt_err(path, "more rows than the footer says"));
        }
        for (j, &c) in feats.iter().enumerate() {
            let col = as_f64(batch.column(c)).map_err(|e| fmt_err(path, e))?;
            let name = &names[j];
            for (r, v) in col.iter().enumerate() {
                match v {
                    Some(v) if v.is_finite() => x[[at + r, j]] = v,
                    _ => {
                        return Err(fmt_err(
                            path,
                            format!("row {}, column `{name}`: null or not finite", at + r),
                        ));
                    }
                }
            }
        }
        let lab = as_f64(batch.column(label_idx)).map_err(|e| fmt_err(path, e))?;
        for (r, v) in lab.iter().enumerate() {
            match v {
                Some(v) if v == 0.0 || v == 1.0 => y.push(v == 1.0),
                other => {
                    return Err(fmt_err(
                        path,
                        format!("row {}, column `{label}`: {other:?} is not 0 or 1", at + r),
                    ));
                }
            }
        }
        at += n;
    }
    if at != rows {
        return Err(fmt_err(
            path,
            format!("{at} rows read, the footer says {rows}"),
        ));
    }
    Ok(Table { names, x, y })
}

fn as_f64(a: &ArrayRef) -> Result<Float64Array, String> {
    let c = arrow_cast::cast(a, &DataType::Float64).map_err(|e| e.to_string())?;
    Ok(c.as_primitive::<Float64Type>().clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use arrow_array::{BooleanArray, RecordBatch};
    use arrow_schema::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;

    /// Writes `t` (features as float64, the label as boolean `label`) and extra float64 columns
    /// (e.g. predictions) to a zstd Parquet file, through a temporary file and a rename.
    fn write_table(
        path: &Path,
        t: &Table,
        label: &str,
        extra: &[(&str, &[f64])],
    ) -> Result<(), TableError> {
        let mut fields: Vec<Field> = t
            .names
            .iter()
            .map(|n| Field::new(n, DataType::Float64, false))
            .collect();
        fields.push(Field::new(label, DataType::Boolean, false));
        fields.extend(
            extra
                .iter()
                .map(|(n, _)| Field::new(*n, DataType::Float64, false)),
        );
        let schema = Arc::new(Schema::new(fields));
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .build();
        let tmp = mm_artifact::fsio::temp_path(path);
        let io = |source| TableError::Io {
            path: tmp.display().to_string(),
            source,
        };
        let file = File::create(&tmp).map_err(io)?;
        let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| fmt_err(&tmp, e))?;
        let n = t.x.nrows();
        let chunk = 131_072;
        let mut lo = 0;
        while lo < n {
            let hi = (lo + chunk).min(n);
            let mut cols: Vec<ArrayRef> = (0..t.x.ncols())
                .map(|j| {
                    Arc::new(Float64Array::from_iter_values(
                        (lo..hi).map(|i| t.x[[i, j]]),
                    )) as ArrayRef
                })
                .collect();
            cols.push(Arc::new(BooleanArray::from(t.y[lo..hi].to_vec())));
            for (_, v) in extra {
                cols.push(Arc::new(Float64Array::from(v[lo..hi].to_vec())));
            }
            let batch = RecordBatch::try_new(schema.clone(), cols).map_err(|e| fmt_err(&tmp, e))?;
            w.write(&batch).map_err(|e| fmt_err(&tmp, e))?;
            lo = hi;
        }
        w.close().map_err(|e| fmt_err(&tmp, e))?;
        mm_artifact::fsio::publish(&tmp, path).map_err(|source| TableError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok(())
    }

    #[test]
    fn round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        let t = Table {
            names: vec!["a".into(), "b".into()],
            x: ndarray::array![[1.0, 2.5], [-3.0, 0.0], [0.25, 7.0]],
            y: vec![true, false, true],
        };
        write_table(&p, &t, "churned", &[("p", &[0.1, 0.2, 0.3])]).unwrap();
        let back = read_table(&p, "churned").unwrap();
        // The extra column is numeric, so it reads back as a feature.
        assert_eq!(back.names, ["a", "b", "p"]);
        assert_eq!(back.y, t.y);
        assert_eq!(back.x.column(1), t.x.column(1));
        let e = read_table(&p, "nope").unwrap_err().to_string();
        assert!(e.contains("t.parquet") && e.contains("nope"), "{e}");
        let e = read_table(&dir.path().join("missing.parquet"), "y")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.parquet"), "{e}");
    }
}
