//! Compiles `proto/csi.proto` (the subset of the CSI v1 spec cnsreplay-csi serves, field numbers
//! as the spec defines them), `proto/snapshot_metadata.proto` (the spec's SnapshotMetadata
//! service, same package) and `proto/pluginregistration.proto` (the kubelet's plugin
//! registration) with the pure-Rust `protox`, so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/csi.proto");
    println!("cargo:rerun-if-changed=proto/snapshot_metadata.proto");
    println!("cargo:rerun-if-changed=proto/pluginregistration.proto");
    let fds = protox::compile(
        [
            "csi.proto",
            "snapshot_metadata.proto",
            "pluginregistration.proto",
        ],
        ["proto"],
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
