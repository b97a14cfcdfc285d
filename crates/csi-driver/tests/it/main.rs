//! Integration tests of cnsreplay-csi: gRPC over the real Unix socket with a tonic client
//! (`grpc`, always run), and through a real API server and the CSI sidecars (`cluster`, when
//! `CNSREPLAY_TESTENV` names a running local cluster's `testenv.env`).

mod cluster;
mod fs_types;
mod group;
mod grpc;
mod harness;
mod metadata;
mod registration;
