//! The open-loop replay engine: dispatches every trace event at its intended time, measures
//! response, service time and lateness from that time, and drives storage through one
//! provider trait (sim, local, and the Kubernetes provider in its own leaf crate).
//!
//! This crate is not written yet; its issue in the tracker describes what it will hold.
