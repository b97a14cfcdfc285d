//! The three block-trace CSV formats: each one's columns, time base and line parser (the
//! module notes of `blockcsv` describe them).

use std::collections::HashMap;

use trace_format::IoKind;

use super::{FILETIME_TO_UNIX_S, Format, Keys, Loc, NS_PER_S, Rec, field};
use crate::BadInput;

pub(super) struct Msr;

impl Format for Msr {
    const SOURCE_FORMAT: &'static str = "msr-cambridge-csv";
    const COLUMNS: &'static [&'static str] = &[
        "Timestamp",
        "Hostname",
        "DiskNumber",
        "Type",
        "Offset",
        "Size",
        "ResponseTime",
    ];
    const EPOCH_UNIX_S: i64 = -FILETIME_TO_UNIX_S;
    const SPREAD: bool = false;
    const TIME: (usize, u64) = (0, 100);
    const SANITIZE: bool = true;

    fn parse(&self, loc: &Loc<'_>, f: &[&str], keys: &mut Keys) -> Result<Rec, BadInput> {
        let ticks = loc.number(f, 0)?;
        let t = loc.scale(0, ticks, 100, "time in nanoseconds")?;
        let host = field(f, 1);
        if host.is_empty() {
            return Err(loc.col(1, "empty Hostname"));
        }
        let disk = loc.number(f, 2)?;
        let kind = match field(f, 3) {
            k if k.eq_ignore_ascii_case("read") => IoKind::Read,
            k if k.eq_ignore_ascii_case("write") => IoKind::Write,
            other => {
                return Err(loc.col(3, format!("unknown Type {other:?}, expected Read or Write")));
            }
        };
        let offset = loc.number(f, 4)?;
        let len = loc.number(f, 5)?;
        loc.extent(5, offset, len)?;
        let rt = loc.number(f, 6)?;
        let observed = loc.scale(6, rt, 100, "response time in nanoseconds")?;
        Ok(Rec {
            t,
            volume: keys.get(host, disk, || format!("{host}-{disk}")),
            kind,
            offset,
            len,
            observed: Some(observed),
        })
    }
}

pub(super) struct Alibaba {
    /// `device_size.csv`: device id → capacity in bytes.
    pub(super) sizes: Option<HashMap<u64, u64>>,
}

impl Format for Alibaba {
    const SOURCE_FORMAT: &'static str = "alibaba-block-csv";
    const COLUMNS: &'static [&'static str] =
        &["device_id", "opcode", "offset", "length", "timestamp"];
    const EPOCH_UNIX_S: i64 = 0;
    const SPREAD: bool = false;
    const TIME: (usize, u64) = (4, 1000);

    fn capacity(&self, key: &str) -> Option<u64> {
        let id = key.strip_prefix("dev-")?.parse::<u64>().ok()?;
        self.sizes.as_ref()?.get(&id).copied()
    }

    fn parse(&self, loc: &Loc<'_>, f: &[&str], keys: &mut Keys) -> Result<Rec, BadInput> {
        let device = loc.number(f, 0)?;
        let kind = match field(f, 1) {
            "R" => IoKind::Read,
            "W" => IoKind::Write,
            other => return Err(loc.col(1, format!("unknown opcode {other:?}, expected R or W"))),
        };
        let offset = loc.number(f, 2)?;
        let len = loc.number(f, 3)?;
        let end = loc.extent(3, offset, len)?;
        let us = loc.number(f, 4)?;
        let t = loc.scale(4, us, 1000, "time in nanoseconds")?;
        if let Some(cap) = self.sizes.as_ref().and_then(|s| s.get(&device))
            && end > *cap
        {
            return Err(loc.col(
                3,
                format!(
                    "offset + length = {end} is beyond device {device}'s capacity of {cap} \
                     bytes (device_size.csv)"
                ),
            ));
        }
        Ok(Rec {
            t,
            volume: keys.get("", device, || format!("dev-{device}")),
            kind,
            offset,
            len,
            observed: None,
        })
    }
}

pub(super) struct Tencent;

impl Format for Tencent {
    const SOURCE_FORMAT: &'static str = "tencent-cbs-csv";
    const COLUMNS: &'static [&'static str] = &["Timestamp", "Offset", "Size", "IOType", "VolumeID"];
    const EPOCH_UNIX_S: i64 = 0;
    const SPREAD: bool = true;
    const TIME: (usize, u64) = (0, NS_PER_S);

    fn parse(&self, loc: &Loc<'_>, f: &[&str], keys: &mut Keys) -> Result<Rec, BadInput> {
        let s = loc.number(f, 0)?;
        // The spread adds up to 1 s − 1 ns: the whole second must fit.
        let t = s
            .checked_mul(NS_PER_S)
            .filter(|t| t.checked_add(NS_PER_S - 1).is_some())
            .ok_or_else(|| loc.col(0, "time in nanoseconds overflows 64 bits"))?;
        let off_sectors = loc.number(f, 1)?;
        let offset = loc.scale(1, off_sectors, 512, "Offset in sectors × 512")?;
        let len_sectors = loc.number(f, 2)?;
        let len = loc.scale(2, len_sectors, 512, "Size in sectors × 512")?;
        loc.extent(2, offset, len)?;
        let kind = match field(f, 3) {
            "0" => IoKind::Read,
            "1" => IoKind::Write,
            other => {
                return Err(loc.col(
                    3,
                    format!("unknown IOType {other:?}, expected 0 (read) or 1 (write)"),
                ));
            }
        };
        let vol = loc.number(f, 4)?;
        Ok(Rec {
            t,
            volume: keys.get("", vol, || format!("vol-{vol}")),
            kind,
            offset,
            len,
            observed: None,
        })
    }
}
