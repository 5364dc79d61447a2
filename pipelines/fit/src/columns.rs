//! Typed columns of a Parquet file read through polars, each error naming the file: what the
//! export and the evaluation read from a fit's outputs.

use std::path::Path;

use polars::prelude::*;

use crate::error::{FitError, input_err};

/// The whole file, or an error naming it (and "run the fit first" when it is missing).
pub fn read_frame(path: &Path) -> Result<DataFrame, FitError> {
    if !path.exists() {
        return Err(input_err(path, "not found (run the fit first)"));
    }
    LazyFrame::scan_parquet(
        PlRefPath::from(path.to_string_lossy().as_ref()),
        ScanArgsParquet::default(),
    )
    .and_then(LazyFrame::collect)
    .map_err(|e| input_err(path, e))
}

/// One column by name.
pub fn column<'a>(df: &'a DataFrame, path: &Path, name: &str) -> Result<&'a Column, FitError> {
    df.column(name).map_err(|e| input_err(path, e))
}

/// A numeric column as `f64`, nulls kept.
pub fn f64s(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<f64>>, FitError> {
    let c = column(df, path, name)?
        .cast(&DataType::Float64)
        .map_err(|e| input_err(path, e))?;
    Ok(c.f64().map_err(|e| input_err(path, e))?.iter().collect())
}

/// An integer column as `i64`, nulls kept.
pub fn i64s(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<i64>>, FitError> {
    let c = column(df, path, name)?
        .cast(&DataType::Int64)
        .map_err(|e| input_err(path, e))?;
    Ok(c.i64().map_err(|e| input_err(path, e))?.iter().collect())
}

/// A boolean column, nulls kept.
pub fn bools(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<bool>>, FitError> {
    let c = column(df, path, name)?;
    Ok(c.bool().map_err(|e| input_err(path, e))?.iter().collect())
}

/// A string column with no null (a null is an error naming the column).
pub fn strings(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<String>, FitError> {
    let c = column(df, path, name)?;
    c.str()
        .map_err(|e| input_err(path, e))?
        .iter()
        .map(|s| {
            s.map(String::from)
                .ok_or_else(|| input_err(path, format!("{name} has a null")))
        })
        .collect()
}
