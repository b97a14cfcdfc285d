//! Synchronous storage primitives shared by the `local` provider and the `cnsreplay-csi` driver:
//! create (+ format) an image, attach/detach a loop device, mount/unmount, copy (reflink or
//! full, reporting which), restore (copy + grow), grow (file, loop, file system), freeze/thaw;
//! the changed blocks between two images ([`cbt`]) and the kernel's block throttle that a
//! volume's I/O limits become ([`throttle`]). Nothing here knows a trace, a run or a provider:
//! this crate is what the CSI driver links instead of the replay engine.
//!
//! File systems: ext4 (the default) and xfs ([`FsType`]). They differ where it matters to a
//! benchmark of a real cluster: ext4's online grow (resize2fs) needs CAP_SYS_RESOURCE, which
//! sandboxed hosts often lack, while xfs grows only online (xfs_growfs on a mount point, which
//! needs only CAP_SYS_ADMIN), so an "offline" xfs grow is a private temporary mount. A restored
//! xfs copy carries its source's UUID, so xfs mounts use `nouuid` to sit beside the source.
//!
//! Each primitive does one step and nothing else: no ledger, no state, no phases. Callers
//! record what they intend before calling (the provider's ledger, the driver's state file)
//! and time each step themselves. Failures name the command and its stderr, or the path.
//! The primitives are re-exported here, flat: callers write `local_storage::attach_loop`.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `error`, `cbt`, `throttle` (apart) — the primitives' error; changed blocks and the block throttle, which stand alone
//! 2. `command` — running a command, paths as strings, whether we are root
//! 3. `fs`, `device` — file systems (mkfs); loop devices and mounts
//! 4. `image` — image files: create, copy (reflink or full), grow the file
//! 5. `grow`, `snapshot` (apart) — growing file systems and restoring; freeze, copy, thaw

pub mod cbt;
mod command;
mod device;
mod error;
mod fs;
mod grow;
mod image;
mod snapshot;
pub mod throttle;

pub use command::{is_root, path_str, run};
pub use device::{
    attach_loop, detach_loop, is_mounted, loops_of, mount, mount_points, refresh_loop, unmount,
};
pub use error::StorageError;
pub use fs::{FsType, mkfs, mkfs_as};
pub use grow::{
    GrowKind, grow_fs, grow_fs_mounted, grow_fs_mounted_as, grow_offline, grow_offline_as, restore,
    scratch_of,
};
pub use image::{CopyKind, copy_image, create_image, grow_file};
pub use snapshot::{
    Member, freeze, group_snapshot_copy, group_snapshot_copy_timed, snapshot_copy, thaw,
};
