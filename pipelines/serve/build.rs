//! Compiles `proto/mm/v1/matcher.proto` (server and client stubs) with protox, a protobuf
//! compiler in Rust, so that building needs no protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time, not with `env!`: a build script compiled in another checkout that
    // shares the target directory would otherwise look for the protos there.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    let proto_dir = std::path::Path::new(&manifest_dir).join("../../proto");
    let file = proto_dir.join("mm/v1/matcher.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&proto_dir])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
