//! Compiles `proto/schema.proto` (the Kubernetes SnapshotMetadata API a backup client calls,
//! package `snapshotmetadata`) with the pure-Rust `protox`, so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/schema.proto");
    let fds = protox::compile(["schema.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
