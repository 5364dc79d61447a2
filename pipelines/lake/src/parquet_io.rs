//! The Parquet files the lake writes (one set of writer properties for every data file) and
//! reads, and the atomic write of small files.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::error::{LakeError, Result, io_err};

/// The zstd level of every Parquet file the lake writes: level 1 writes faster than level 3
/// with files no larger on the lake's day partitions.
pub const ZSTD_LEVEL: i32 = 1;

/// Low-cardinality text columns, dictionary-encoded. Every other column is written plain:
/// dictionary building costs more time than it saves bytes once zstd has done its work.
const DICTIONARY: [&str; 10] = [
    "mode",
    "outcome",
    "team_name",
    "role",
    "input_device",
    "platform",
    "region",
    "source_file",
    "stage",
    "field",
];

/// Writer properties of one lake file: zstd, statistics, our name as the writer. Columns that
/// are null in every row, and those in [`UNCOMPRESSED`], are left uncompressed: they encode to
/// a few bytes a row or less either way, and a compressed column costs a zstd compressor and
/// decompressor per file. Creating those runs the `cpuid` instruction, which traps to the
/// hypervisor on a virtual machine: on the 10M-row benchmark (688 day files) the contexts of 14
/// compressed columns took 4.5% of the run's CPU time.
///
/// Floating-point columns are written with `BYTE_STREAM_SPLIT`: each byte position of the
/// values in a stream of its own, so zstd meets long runs of equal high bytes and has less to
/// do. The lakes of the four real data sets are 1.5 to 5.5% smaller for it and chunk-level
/// statistics, the 10M-row benchmark's 1.7% (`mm ingest`, then `du -sb` of `matches/`).
fn properties_for(batches: &[RecordBatch]) -> WriterProperties {
    let mut b = properties_builder();
    for c in UNCOMPRESSED {
        b = b.set_column_compression(c.into(), Compression::UNCOMPRESSED);
    }
    if let Some(first) = batches.first() {
        for (k, field) in first.schema().fields().iter().enumerate() {
            if matches!(field.data_type(), DataType::Float64 | DataType::Float32) {
                b = b
                    .set_column_encoding(field.name().as_str().into(), Encoding::BYTE_STREAM_SPLIT);
            }
            if batches
                .iter()
                .all(|x| x.column(k).null_count() == x.num_rows())
            {
                b = b.set_column_compression(
                    field.name().as_str().into(),
                    Compression::UNCOMPRESSED,
                );
            }
        }
    }
    b.build()
}

fn properties_builder() -> parquet::file::properties::WriterPropertiesBuilder {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(ZSTD_LEVEL).unwrap_or_default(),
        ))
        .set_dictionary_enabled(false)
        // Min/max per column chunk (a file's row group), not per page: a day file's columns are
        // a page or a few, the column index of per-page ranges would repeat the chunk's, and
        // computing it costs a comparison per value per level.
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_created_by(concat!("mm ", env!("CARGO_PKG_VERSION")).to_string());
    for c in DICTIONARY {
        b = b.set_column_dictionary_enabled(c.into(), true);
    }
    // Identifiers are looked up, never filtered by range: min/max statistics would cost a string
    // comparison per value and prune nothing (nor would they for the outcome or source file).
    for c in NO_STATISTICS {
        b = b.set_column_statistics_enabled(c.into(), EnabledStatistics::None);
    }
    // Sorted or nearly sorted integers: deltas are small, so zstd has far less to do.
    for c in DELTA {
        b = b.set_column_encoding(c.into(), Encoding::DELTA_BINARY_PACKED);
    }
    b
}

/// Identifier and free-text columns, and the outcome and source file (three values, one value),
/// written without min/max statistics.
const NO_STATISTICS: [&str; 7] = [
    "match_id",
    "player_id",
    "party_id",
    "extra",
    "raw",
    "outcome",
    "source_file",
];

/// Columns written without compression: bit-packed counts, which zstd shrinks by about 3%
/// (kills, deaths, deaths by enemy on the 10M-row benchmark), and columns whose encoding leaves
/// almost nothing (a dictionary of one mode or one source file, consecutive line numbers).
const UNCOMPRESSED: [&str; 8] = [
    "kills",
    "deaths",
    "deaths_by_enemy",
    "self_kills",
    "assists",
    "mode",
    "source_file",
    "source_line",
];

/// Integer columns written with delta encoding: times and line numbers are sorted or nearly so
/// within a file, and the counts are small, so the encoding packs them into a few bits a value
/// and zstd has far less to do (on the 10M-row benchmark: 7% smaller, and less CPU).
const DELTA: [&str; 10] = [
    "start_time",
    "end_time",
    "source_line",
    "line",
    "team",
    "kills",
    "deaths",
    "deaths_by_enemy",
    "self_kills",
    "assists",
];

/// Writes `batches` to a new Parquet file at `path` and fsyncs it. Returns the size in bytes.
pub fn write_parquet_file(path: &Path, batches: &[RecordBatch]) -> Result<u64> {
    let file = write_parquet_unsynced(path, batches)?;
    file.sync_all().map_err(io_err(path))?;
    Ok(file.metadata().map_err(io_err(path))?.len())
}

/// Writes `batches` to a new Parquet file at `path` and returns it open, not yet synced.
pub(crate) fn write_parquet_unsynced(path: &Path, batches: &[RecordBatch]) -> Result<File> {
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .ok_or_else(|| LakeError::Corrupt {
            path: path.to_path_buf(),
            reason: "refusing to write a Parquet file with no batches".into(),
        })?;
    let file = File::create_new(path).map_err(io_err(path))?;
    let pq = |source| LakeError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let mut w = ArrowWriter::try_new(
        BufWriter::with_capacity(1 << 20, file),
        schema,
        Some(properties_for(batches)),
    )
    .map_err(pq)?;
    for b in batches {
        w.write(b).map_err(pq)?;
    }
    let buf = w.into_inner().map_err(pq)?;
    buf.into_inner().map_err(|e| LakeError::Io {
        path: path.to_path_buf(),
        source: e.into_error(),
    })
}

/// Reads the named columns of a Parquet file (all of them when `columns` is `None`).
pub fn read_parquet_columns(path: &Path, columns: Option<&[&str]>) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for_each_batch(path, columns, |b| {
        out.push(b);
        Ok(())
    })?;
    Ok(out)
}

/// Calls `f` with each record batch of the named columns of a Parquet file (all of them when
/// `columns` is `None`), one batch in memory at a time; `f`'s error type is the caller's.
///
/// # Errors
/// The file cannot be read, or `f` fails.
pub fn for_each_batch<E: From<LakeError>>(
    path: &Path,
    columns: Option<&[&str]>,
    mut f: impl FnMut(RecordBatch) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let file = File::open(path).map_err(io_err(path))?;
    let pq = |source| LakeError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let mut builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
    if let Some(cols) = columns {
        let mask = ProjectionMask::columns(builder.parquet_schema(), cols.iter().copied());
        builder = builder.with_projection(mask);
    }
    for b in builder.with_batch_size(64 * 1024).build().map_err(pq)? {
        let b = b.map_err(|source| LakeError::Arrow {
            path: path.to_path_buf(),
            source,
        })?;
        f(b)?;
    }
    Ok(())
}

/// Copies the rows of the Parquet file `src` that `keep` selects into a new Parquet file `dst`,
/// a batch at a time: the columns of `schema`, by name, cast to its types (a file written by
/// polars holds its strings as views) before `keep` sees them. Returns the rows written; with none, `dst` is not
/// created.
///
/// # Errors
/// `src` cannot be read, lacks a column of `schema` or holds one that does not cast, `keep`
/// fails, or `dst` cannot be written.
pub fn copy_rows(
    src: &Path,
    dst: &Path,
    schema: &arrow_schema::SchemaRef,
    mut keep: impl FnMut(&RecordBatch) -> Result<arrow_array::BooleanArray>,
) -> Result<u64> {
    let arrow = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LakeError::Arrow { path, source }
    };
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let mut writer: Option<ArrowWriter<BufWriter<File>>> = None;
    let mut rows = 0u64;
    for_each_batch(src, Some(&names), |b| {
        let cols = schema
            .fields()
            .iter()
            .map(|f| {
                let c = b
                    .column_by_name(f.name())
                    .ok_or_else(|| LakeError::Corrupt {
                        path: src.to_path_buf(),
                        reason: format!("no column {:?}", f.name()),
                    })?;
                arrow_cast::cast(c, f.data_type()).map_err(arrow(src))
            })
            .collect::<Result<Vec<_>>>()?;
        let b = RecordBatch::try_new(schema.clone(), cols).map_err(arrow(src))?;
        let mask = keep(&b)?;
        let b = arrow_select::filter::filter_record_batch(&b, &mask).map_err(arrow(src))?;
        if b.num_rows() == 0 {
            return Ok(());
        }
        if writer.is_none() {
            let f = File::create_new(dst).map_err(io_err(dst))?;
            writer = Some(
                ArrowWriter::try_new(
                    BufWriter::with_capacity(1 << 20, f),
                    schema.clone(),
                    Some(properties_for(std::slice::from_ref(&b))),
                )
                .map_err(|source| LakeError::Parquet {
                    path: dst.to_path_buf(),
                    source,
                })?,
            );
        }
        if let Some(w) = writer.as_mut() {
            w.write(&b).map_err(|source| LakeError::Parquet {
                path: dst.to_path_buf(),
                source,
            })?;
        }
        rows += b.num_rows() as u64;
        Ok(())
    })?;
    if let Some(w) = writer {
        let buf = w.into_inner().map_err(|source| LakeError::Parquet {
            path: dst.to_path_buf(),
            source,
        })?;
        let f = buf.into_inner().map_err(|e| LakeError::Io {
            path: dst.to_path_buf(),
            source: e.into_error(),
        })?;
        f.sync_all().map_err(io_err(dst))?;
    }
    Ok(rows)
}

pub(crate) fn sync_dir(path: &Path) -> Result<()> {
    mm_artifact::fsio::sync_dir(path).map_err(io_err(path))
}

/// Writes `bytes` to `path` atomically and durably ([`mm_artifact::fsio::write_atomic`], with
/// the lake's error).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    mm_artifact::fsio::write_atomic(path, bytes).map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{ArrayRef, Float64Array, Int64Array, LargeStringArray};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    /// `copy_rows` casts before it filters, keeps only `schema`'s columns, and writes no file
    /// when nothing is kept.
    #[test]
    fn copy_rows_casts_filters_and_projects() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.parquet");
        let ids: Vec<String> = (0..1000).map(|i| format!("p{i}")).collect();
        let batch = RecordBatch::try_from_iter([
            (
                "player_id",
                Arc::new(LargeStringArray::from(ids.clone())) as ArrayRef,
            ),
            ("start_ms", Arc::new(Int64Array::from_iter_values(0..1000))),
            (
                "x",
                Arc::new(Float64Array::from_iter_values((0..1000).map(f64::from))),
            ),
            ("extra", Arc::new(Int64Array::from_iter_values(0..1000))),
        ])
        .unwrap();
        write_parquet_file(&src, &[batch]).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("player_id", DataType::Utf8, false),
            Field::new("start_ms", DataType::Int64, false),
            Field::new("x", DataType::Float64, true),
        ]));
        let dst = dir.path().join("dst.parquet");
        let n = copy_rows(&src, &dst, &schema, |b| {
            let s = b
                .column_by_name("start_ms")
                .unwrap()
                .as_primitive::<Int64Type>();
            Ok(s.iter().map(|t| t.map(|t| t % 7 == 0)).collect())
        })
        .unwrap();
        assert_eq!(n, 143);
        let out = read_parquet_columns(&dst, None).unwrap();
        assert_eq!(out[0].schema().fields().len(), 3);
        let p = out[0].column(0).as_string::<i32>();
        assert_eq!(p.value(2), "p14");
        assert_eq!(out.iter().map(RecordBatch::num_rows).sum::<usize>(), 143);

        let none = dir.path().join("none.parquet");
        let n = copy_rows(&src, &none, &schema, |b| {
            Ok(arrow_array::BooleanArray::from(vec![false; b.num_rows()]))
        })
        .unwrap();
        assert_eq!(n, 0);
        assert!(!none.exists());
    }

    /// Floating-point columns are written byte-stream-split and come back bit for bit (nulls,
    /// NaN, -0.0, infinities and subnormals included); the file keeps each chunk's min/max (the
    /// Delta log's statistics are read from them) and no per-page column index.
    #[test]
    fn floats_are_byte_stream_split_exact_with_chunk_statistics() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use parquet::file::statistics::Statistics;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        let mut xs: Vec<Option<f64>> = (0..5000)
            .map(|i| Some(f64::from(i) * 0.37 - 400.0))
            .collect();
        let special = [
            None,
            Some(f64::NAN),
            Some(-0.0),
            Some(f64::INFINITY),
            Some(f64::NEG_INFINITY),
            Some(f64::MIN_POSITIVE / 2.0),
        ];
        for (k, v) in special.into_iter().enumerate() {
            xs[k * 997] = v;
        }
        let starts = Int64Array::from_iter_values(0..5000);
        let batch = RecordBatch::try_from_iter([
            ("x", Arc::new(Float64Array::from(xs.clone())) as ArrayRef),
            ("t", Arc::new(starts) as ArrayRef),
        ])
        .unwrap();
        write_parquet_file(&path, &[batch]).unwrap();

        let back = read_parquet_columns(&path, None).unwrap();
        let got: Vec<Option<u64>> = back
            .iter()
            .flat_map(|b| {
                let a = b
                    .column(0)
                    .as_primitive::<arrow_array::types::Float64Type>();
                a.iter().map(|v| v.map(f64::to_bits)).collect::<Vec<_>>()
            })
            .collect();
        let want: Vec<Option<u64>> = xs.iter().map(|v| v.map(f64::to_bits)).collect();
        assert_eq!(got, want);

        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata();
        let x = meta.row_group(0).column(0);
        assert!(x.encodings().any(|e| e == Encoding::BYTE_STREAM_SPLIT));
        assert!(
            x.column_index_length().is_none(),
            "no per-page column index"
        );
        match meta.row_group(0).column(1).statistics() {
            Some(Statistics::Int64(s)) => {
                assert_eq!((s.min_opt(), s.max_opt()), (Some(&0), Some(&4999)));
            }
            other => panic!("the chunk's statistics are missing: {other:?}"),
        }
    }
}
