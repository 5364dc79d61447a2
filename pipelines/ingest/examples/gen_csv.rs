//! Writes the benchmark's seeded peer-shaped CSV without the CLI:
//! `cargo run --release -p mm-ingest --example gen_csv -- OUT.csv ROWS [SEED]`. The default seed
//! is `mm bench ingest`'s, so the file is the one the benchmark generates.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args.next().ok_or("usage: gen_csv OUT.csv ROWS [SEED]")?;
    let rows: u64 = args
        .next()
        .ok_or("usage: gen_csv OUT.csv ROWS [SEED]")?
        .parse()?;
    let seed: u64 = args.next().map_or(Ok(20_240_603), |s| s.parse())?;
    let n = mm_ingest::generate::write_peer_shaped_csv(std::path::Path::new(&out), rows, seed)?;
    println!("{n} rows");
    Ok(())
}
