//! What a request's volume capabilities ask for ([`Access`]: block or mount, which file
//! system), checked once for the Controller and the Node service alike.

use local_storage::FsType;
use tonic::Status;

use crate::pb::{self, volume_capability::access_mode::Mode};
use crate::state::VolumeRec;

/// What the capabilities of a request ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Access {
    /// A raw block volume.
    pub block: bool,
    /// The file system named by `fs_type` (`None`: not named; block volumes have none).
    pub fs: Option<FsType>,
}

impl Access {
    /// Why this request does not fit volume `v` (mode or file system), if it does not.
    pub(crate) fn mismatch(&self, v: &VolumeRec) -> Option<Status> {
        if v.block != self.block {
            return Some(Status::invalid_argument(
                "access type differs from the volume's (block vs mount)",
            ));
        }
        match self.fs {
            Some(fs) if !v.block && fs != v.fs => Some(Status::invalid_argument(format!(
                "fs_type {fs} differs from the volume's file system {}",
                v.fs
            ))),
            _ => None,
        }
    }
}

/// Checks volume capabilities: one access type and one file system across them.
pub(crate) fn check_caps(caps: &[pb::VolumeCapability]) -> Result<Access, Status> {
    if caps.is_empty() {
        return Err(Status::invalid_argument("volume_capabilities is required"));
    }
    let mut seen: Option<Access> = None;
    for c in caps {
        let mode = c
            .access_mode
            .as_ref()
            .map(|m| m.mode())
            .ok_or_else(|| Status::invalid_argument("access_mode is required"))?;
        if mode == Mode::Unknown {
            return Err(Status::invalid_argument("access_mode UNKNOWN"));
        }
        let this = match &c.access_type {
            Some(pb::volume_capability::AccessType::Block(_)) => Access {
                block: true,
                fs: None,
            },
            Some(pb::volume_capability::AccessType::Mount(m)) => {
                let fs = if m.fs_type.is_empty() {
                    None
                } else {
                    Some(FsType::parse(&m.fs_type).ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "fs_type {:?} is not supported ({})",
                            m.fs_type,
                            FsType::NAMES
                        ))
                    })?)
                };
                Access { block: false, fs }
            }
            None => return Err(Status::invalid_argument("access_type is required")),
        };
        match seen {
            Some(a) if a.block != this.block => {
                return Err(Status::invalid_argument(
                    "block and mount access types in one request",
                ));
            }
            Some(a) if a.fs.is_some() && this.fs.is_some() && a.fs != this.fs => {
                return Err(Status::invalid_argument(
                    "two file systems (fs_type) in one request",
                ));
            }
            Some(a) => {
                seen = Some(Access {
                    fs: a.fs.or(this.fs),
                    ..a
                });
            }
            None => seen = Some(this),
        }
    }
    Ok(seen.unwrap_or(Access {
        block: false,
        fs: None,
    }))
}

/// The one capability of a publish/stage call, checked; with what it asks for.
pub(crate) fn one_cap(
    c: Option<&pb::VolumeCapability>,
) -> Result<(pb::VolumeCapability, Access), Status> {
    let cap = c
        .cloned()
        .ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
    let access = check_caps(std::slice::from_ref(&cap))?;
    Ok((cap, access))
}

pub(crate) fn single_node(caps: &pb::VolumeCapability) -> bool {
    matches!(
        caps.access_mode.as_ref().map(|m| m.mode()),
        Some(
            Mode::SingleNodeWriter
                | Mode::SingleNodeReaderOnly
                | Mode::SingleNodeSingleWriter
                | Mode::SingleNodeMultiWriter
        )
    )
}
