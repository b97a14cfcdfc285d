//! The data-path I/O generator: an io_uring engine on dedicated threads with open-loop,
//! coordinated-omission-safe latency recording, plus a portable pread/pwrite fallback.
//!
//! This crate is not written yet; its issue in the tracker describes what it will hold.
