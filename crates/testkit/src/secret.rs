//! Credentials the tests write (kubeconfigs with a service account's token).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Writes a credential readable by its owner only (0600 from its creation: never a moment
/// with wider permissions), replacing a file already at `path`; panics naming the path.
pub fn write_secret(path: &Path, bytes: &[u8]) {
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.write_all(bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
