//! The `local` provider: real storage work on this machine, no cluster.
//!
//! As root, a volume is an image file formatted with mkfs.ext4 (create = allocate + mkfs),
//! attached as a loop device and mounted (attach = losetup + mount); a snapshot is a reflink
//! copy of the image where the run directory's file system supports FICLONE, else a full copy
//! (each snapshot records which in its phase name); restore/clone copy the same way; resize
//! grows the file, `losetup -c` and resize2fs; detach unmounts and detaches the loop; delete
//! removes the file. Without root, volumes are plain directories holding one data file, with a
//! notice saying so. Everything lives under `RUNDIR/objects/`, and every object is in the
//! run's ledger before it exists, so cleanup removes exactly the run's objects.
//!
//! Nodes are only labels here: `cordon_node` marks one, `drain_node` reschedules its
//! workloads, and `reschedule` is detach + attach of the workload's volumes (its I/O is
//! stopped, like a pod that is moved). `io_phase` runs iogen on the volume — on a file-system
//! volume the target is one data file, `cnsreplay-io.dat`, on its mount; on a block volume the
//! loop device — and its results go to `RUNDIR/io/`.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`). The storage itself is the `local-storage` crate's.
//!
//! 1. `config`, `sys` — the configuration; provider errors over the storage primitives
//! 2. `context` — the provider and the state its operations share
//! 3. `target`, `cleanup` — where a volume's I/O goes; removing a run's leftovers
//! 4. `cbt`, `ordered` (apart) — changed-block listings; ordered writes and the cut check
//! 5. `io` — `io_phase` and bare `io` streams
//! 6. `ops` — the operations, dispatched by event
//! 7. `provider` — the `Provider` impl

mod cbt;
mod cleanup;
mod config;
mod context;
mod io;
mod ops;
mod ordered;
mod provider;
pub mod sys;
mod target;

pub use cleanup::{UNMOUNT_PATIENCE, cleanup};
pub use config::{DEFAULT_STREAM_DEPTH, LocalConfig, Mode, StreamCpus};
pub use context::LocalProvider;
/// The storage primitives ([`local_storage`]), where this crate used to keep them.
pub use local_storage as storage;
/// The block throttle ([`local_storage::throttle`]), where this crate used to keep it.
pub use local_storage::throttle;
