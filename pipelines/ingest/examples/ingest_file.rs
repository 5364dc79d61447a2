//! Ingests files into a lake without the CLI, for profiling the ingest alone:
//! `cargo run --release -p mm-ingest --example ingest_file -- LAKE INPUT...`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let lake = args.next().ok_or("usage: ingest_file LAKE INPUT...")?;
    let inputs: Vec<std::path::PathBuf> = args.map(Into::into).collect();
    let cfg = mm_ingest::IngestConfig::new(lake, inputs);
    let r = mm_ingest::ingest(&cfg, &mm_ingest::NoProgress)?;
    println!(
        "read {} accepted {} in {:.2} s ({:.0} rows/s), stages {:?}, partitions {}",
        r.totals.read,
        r.totals.accepted,
        r.seconds,
        r.records_per_second,
        r.stage_seconds,
        r.partitions_written
    );
    Ok(())
}
