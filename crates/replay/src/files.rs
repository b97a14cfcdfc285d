//! The files of a run directory, one type per kind (docs/run-dir.md): what the providers write
//! and `analyze` reads, defined once here so writer and reader cannot drift apart.
//!
//! | file | type |
//! |---|---|
//! | `manifest.json` | [`Manifest`](crate::rundir::Manifest) |
//! | `events.jsonl` | one [`EventRecord`](crate::record::EventRecord) per line (`run-dir-events`) |
//! | `histograms/OP.hlog` | HdrHistogram V2 interval logs, one per op type |
//! | `summary.json` | [`Summary`](crate::record::Summary) (`docs/schemas/run.schema.json`) |
//! | `ledger.jsonl` | one [`LedgerEntry`](crate::ledger::LedgerEntry) per line, with its `op` (`run-dir-ledger`) |
//! | `io/ID.json` | iogen's own report, [`iogen::Summary`] |
//! | `io/ID.hlog` | iogen's interval log (HdrHistogram V2, tags `<kind>.<metric>`) |
//! | `io/ID.log` | a kube `io_phase` pod's log, as text |
//! | `io/ID.ordered.log` | iogen's binary ordered-write log, [`iogen::OrderedLog`] |
//! | `io/ID.ordered.json` | the local ordered writer's counts, [`iogen::OrderedResult`] (`run-dir-ordered`) |
//! | `io/ID.cut.json` | a cut check, [`CutFile`] (`run-dir-cut`) |
//! | `io/ID.written` | a verify-mode writer's written set ([`iogen::written`]) |
//! | `io/gens-*.state` | iogen's verify generation map of a volume |
//! | `io/streams/*.json` | a bare I/O stream's rate curve, [`RateCurve`](crate::streams::RateCurve) |
//! | `io/stream-pods/NAME.log` | a kube I/O stream pod's log, as text |
//! | `cbt/ID.json` | a changed-block listing, [`CbtFile`] (`run-dir-cbt`) |
//!
//! A name in parentheses is the file's JSON Schema, `docs/schemas/NAME.schema.json`
//! (`schemas()`; `summary.json`'s is `run.schema.json`, the `run --json` output).
//!
//! The local and the kube provider write the same `io/ID.cut.json` and `cbt/ID.json` types,
//! but they do not measure the same things: the local provider times a snapshot on its own
//! clock, to the nanosecond, down to each member's freeze; the kube provider sees what the API
//! shows (its calls and watch events on the run's clock, and `status.creationTime` in whole
//! seconds). A field says which it holds by its name (`creation_spread_ns` from the local
//! clock, `api_creation_spread_s` from `creationTime`); a provider leaves out what it does not
//! measure. Names written by earlier versions are still read (serde aliases).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use trace_format::OpType;
use trace_format::units::fmt_ms;

/// `io/ID.cut.json`: a consistency check of snapshots under ordered writes (a checking
/// `io_phase.ordered`, docs/replay.md, *Group snapshots: the cut*).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CutFile {
    /// The log's name in the trace.
    pub log: String,
    /// The writer's log file (`io/<writer id>.ordered.log`) when the check ran.
    pub log_file: PathBuf,
    /// iogen's decision (`iogen::verify_cut`).
    pub report: iogen::CutReport,
    /// The decision in one line, volumes also by name.
    pub verdict: String,
    /// Local provider: the earliest member's snapshot request → the latest member's cut (a
    /// group: every member frozen), ns on the run's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_to_cut_ns: Option<u64>,
    /// Local provider: the latest cut → every member copied and thawed (ready to restore), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_to_ready_ns: Option<u64>,
    /// Local provider: the latest member's own creation instant (its freeze returned) − the
    /// earliest, ns on the provider's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_spread_ns: Option<u64>,
    /// Kube provider: the earliest member's request (the API call) → the latest member ready
    /// (the watch event that showed it), ns on the run's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_to_ready_ns: Option<u64>,
    /// Kube provider: the members' VolumeSnapshot `status.creationTime`s, latest − earliest,
    /// in whole seconds (the API's resolution; present when every member has one).
    #[serde(
        default,
        alias = "creation_spread_s",
        skip_serializing_if = "Option::is_none"
    )]
    pub api_creation_spread_s: Option<i64>,
    /// Per written volume, in the writer's order.
    pub members: Vec<CutMember>,
}

impl CutFile {
    /// The check in one line for the summary's notices: verdict, how the snapshots were taken
    /// (with what the provider measured of it), each volume's pause, and where the file is.
    pub fn notice(&self, id: u64) -> String {
        let mut by: Vec<&str> = self
            .members
            .iter()
            .filter_map(|m| m.taken.as_ref().map(|t| t.by.as_str()))
            .collect();
        by.dedup();
        let by = by.join(", ");
        let mut s = format!("cut check (event {id}, log {}): {}", self.log, self.verdict);
        if let (Some(a), Some(b), Some(c)) = (
            self.request_to_cut_ns,
            self.cut_to_ready_ns,
            self.creation_spread_ns,
        ) {
            s += &format!(
                "; {by}: request → cut {}, cut → ready {}, members' creation spread {}",
                fmt_ms(a, 1),
                fmt_ms(b, 1),
                fmt_ms(c, 1)
            );
        } else if let Some(r) = self.request_to_ready_ns {
            s += &format!("; {by}: request → ready {}", fmt_ms(r, 1));
            if let Some(c) = self.api_creation_spread_s {
                s += &format!(", members' creationTime spread {c} s");
            }
        }
        s += &iogen::cut::pauses_notice(self.members.iter().map(|m| (m.volume.as_str(), &m.pause)));
        s + &format!(" (io/{id}.cut.json)")
    }
}

/// One member of a cut check: how its snapshot was taken and what its volume's writes saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CutMember {
    /// The written volume (trace name).
    pub volume: String,
    /// Its restored copy, which was checked.
    pub restored: String,
    /// The snapshot the copy was restored from (absent: not restored from a snapshot).
    #[serde(default)]
    pub taken: Option<SnapshotTaken>,
    /// Its writes around its snapshot (`pause_ns`, `pause_from_ns`, `typical_gap_ns`).
    #[serde(flatten)]
    pub pause: iogen::cut::WritePause,
}

/// How a snapshot was taken, ns since the run origin. `requested_ns` and `ready_ns` come from
/// both providers; the member's own instants only from the local provider, its `creationTime`
/// only from the kube provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SnapshotTaken {
    /// What took it: `snapshot NAME`, `group_snapshot NAME` (local) or `group NAME` (kube).
    pub by: String,
    /// The operation began (kube: its API call).
    pub requested_ns: u64,
    /// Ready to restore (local: every member copied and thawed; kube: the watch event that
    /// showed it ready).
    pub ready_ns: u64,
    /// Local provider: this member's own point in time, its freeze returned (unmounted: its
    /// copy began).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_ns: Option<u64>,
    /// Local provider: the cut, every member of the operation frozen (a single snapshot: its
    /// own freeze).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_ns: Option<u64>,
    /// Kube provider: the VolumeSnapshot's `status.creationTime` (RFC 3339, whole seconds),
    /// when the API gave one.
    #[serde(default, alias = "created", skip_serializing_if = "Option::is_none")]
    pub api_creation_time: Option<String>,
}

/// `cbt/ID.json`: a `snapshot_allocated` / `snapshot_delta` listing — its ranges, how long it
/// took as a backup client sees it, and a delta's written-set check (docs/replay.md,
/// *Changed-block tracking*; docs/kubernetes.md, *Changed-block tracking*).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CbtFile {
    /// The event's id.
    pub event: u64,
    /// `snapshot_allocated` or `snapshot_delta`.
    pub op: OpType,
    /// The volume the snapshots are of (trace name; kube: the PVC's name when the volume is
    /// not one the run made).
    pub volume: String,
    /// A delta's base snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The snapshot listed (a delta's later one).
    pub snapshot: String,
    /// Local provider: the block size the ranges were found at, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
    /// Kube provider: the block size the trace asked for (the API has no way to ask for one:
    /// the service answers at its own granularity, `block_metadata_type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_block_size: Option<u64>,
    /// Kube provider: the service's `BlockMetadataType` (`FIXED_LENGTH`, `VARIABLE_LENGTH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_metadata_type: Option<String>,
    /// The size of the volume listed, bytes (local: the larger image; kube: the volume's
    /// capacity as the service reports it).
    pub image_size: u64,
    /// Kube provider: the SnapshotMetadataService called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<CbtService>,
    /// Kube provider: `namespace/name` of the ServiceAccount whose token was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// Kube provider: what it took before the listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<CbtSetup>,
    /// How the listing went.
    pub timing: CbtTiming,
    /// Kube provider: the responses the stream had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responses: Option<u64>,
    /// A delta's written-set check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<iogen::delta_check::DeltaCheck>,
    /// `[offset, length]` in bytes, in offset order.
    pub ranges: Vec<[u64; 2]>,
}

impl CbtFile {
    /// The listing in one line for the summary's notices: what was listed and through what
    /// (the kube provider's service, account and set-up times; the local provider's volume),
    /// how long it took, and a delta's written-set check.
    pub fn notice(&self) -> String {
        let t = &self.timing;
        let what = match &self.base {
            Some(b) => format!("snapshot_delta {b} → {}", self.snapshot),
            None => format!("snapshot_allocated {}", self.snapshot),
        };
        let through = match &self.service {
            Some(service) => format!(
                "SnapshotMetadataService {} at {}, as {}",
                service.name,
                service.address,
                self.account.as_deref().unwrap_or_default()
            ),
            None => format!("volume {}", self.volume),
        };
        let mut s = format!(
            "changed blocks (event {}, {what}, {through}): {} ranges, {:.1} MiB, first range {}, \
             total {} ({:.0} ranges/s, {:.1} MiB/s)",
            self.event,
            t.ranges,
            t.bytes as f64 / 1048576.0,
            t.first_range_ns
                .map_or_else(|| "none".to_owned(), |n| fmt_ms(n, 2)),
            fmt_ms(t.total_ns, 2),
            t.ranges_per_s,
            t.bytes_per_s / 1048576.0
        );
        if let Some(setup) = &self.setup {
            s += &format!(
                "; before the call: resolve {}, token {}, TLS {}",
                fmt_ms(setup.resolve_ns, 2),
                fmt_ms(setup.token_ns, 2),
                fmt_ms(setup.connect_ns, 2),
            );
        }
        if let Some(c) = &self.check {
            if c.phases.is_empty() {
                s += "; written set: none recorded";
            } else {
                s += &format!(
                    "; written set: {} of {} blocks written between the snapshots missing, {} \
                     extra delta blocks",
                    c.missing, c.blocks_in_window, c.extra_blocks
                );
            }
            if !c.not_checked.is_empty() {
                s += &format!(" ({} phases not checked)", c.not_checked.len());
            }
        }
        s + &format!(" (cbt/{}.json)", self.event)
    }
}

/// How a listing went, as a client sees it (ns on the provider's clock, from its request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CbtTiming {
    /// Request → first range, ns (none when there was no range).
    pub first_range_ns: Option<u64>,
    /// Request → last range (the end of the stream), ns.
    pub total_ns: u64,
    /// Ranges listed.
    pub ranges: u64,
    /// Bytes they cover.
    pub bytes: u64,
    /// Ranges per second of `total_ns`.
    pub ranges_per_s: f64,
    /// Bytes per second of `total_ns`.
    pub bytes_per_s: f64,
    /// Local provider: bytes read from the images to find the ranges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u64>,
}

/// The SnapshotMetadataService a kube listing called.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CbtService {
    /// The SnapshotMetadataService object's name.
    pub name: String,
    /// Its address.
    pub address: String,
    /// The audience its tokens are minted for.
    pub audience: String,
}

/// What a kube listing took before its call, ns each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CbtSetup {
    /// Reading the snapshots' contents and the SnapshotMetadataService object.
    pub resolve_ns: u64,
    /// The TokenRequest.
    pub token_ns: u64,
    /// The TLS channel.
    pub connect_ns: u64,
}

/// The JSON Schemas of the run-directory files this module defines, by the name of their
/// committed file (`docs/schemas/NAME.schema.json`).
#[cfg(feature = "schema")]
pub fn schemas() -> Vec<(&'static str, schemars::Schema)> {
    vec![
        (
            "run-dir-events",
            schemars::schema_for!(crate::record::EventRecord),
        ),
        ("run-dir-ledger", schemars::schema_for!(crate::ledger::Line)),
        (
            "run-dir-ordered",
            schemars::schema_for!(iogen::OrderedResult),
        ),
        ("run-dir-cut", schemars::schema_for!(CutFile)),
        ("run-dir-cbt", schemars::schema_for!(CbtFile)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cut check as the kube provider wrote it before the fields said what they measured
    /// (`creation_spread_s`, a member's `created`) still loads, under today's names.
    #[test]
    fn a_cut_file_of_the_kube_provider_with_the_old_names_loads() {
        let f: CutFile = serde_json::from_str(
            r#"{"log":"w","log_file":"/r/io/5.ordered.log",
                "report":{"verdict":{"verdict":"consistent","cut_seq":3,"required":2,
                          "in_flight_present":0,"in_flight_absent":1},
                          "log_writes":9,"blocks_with_writes":[4]},
                "verdict":"consistent","request_to_ready_ns":7,"creation_spread_s":1,
                "members":[{"volume":"a","restored":"ra",
                  "taken":{"by":"group g","requested_ns":1,"ready_ns":2,
                           "created":"2026-12-02T07:00:00Z"},
                  "pause_ns":5,"pause_from_ns":1,"typical_gap_ns":null}]}"#,
        )
        .expect("old kube cut file");
        assert_eq!(f.api_creation_spread_s, Some(1));
        // The notice says what the kube provider measured, in its own words.
        let n = f.notice(5);
        assert!(
            n.starts_with("cut check (event 5, log w): consistent; group g: request → ready ")
                && n.contains(", members' creationTime spread 1 s")
                && !n.contains("request → cut")
                && n.ends_with(" (io/5.cut.json)"),
            "{n}"
        );
        let t = f.members[0].taken.as_ref().expect("taken");
        assert_eq!(t.api_creation_time.as_deref(), Some("2026-12-02T07:00:00Z"));
        assert_eq!((t.created_ns, t.cut_ns), (None, None));
        let text = serde_json::to_string(&f).expect("json");
        assert!(
            text.contains("\"api_creation_spread_s\":1")
                && text.contains("\"api_creation_time\":")
                && !text.contains("\"created\"")
                && !text.contains("creation_spread_ns"),
            "{text}"
        );
    }

    /// The local provider's cut check and listing load as they were written (nulls where it
    /// measured nothing).
    #[test]
    fn local_files_load() {
        let f: CutFile = serde_json::from_str(
            r#"{"log":"w","log_file":"x","report":{"verdict":{"verdict":"consistent",
                "cut_seq":0,"required":0,"in_flight_present":0,"in_flight_absent":0},
                "log_writes":0,"blocks_with_writes":[]},"verdict":"v",
                "request_to_cut_ns":null,"cut_to_ready_ns":null,"creation_spread_ns":null,
                "members":[{"volume":"a","restored":"b","taken":{"by":"snapshot s",
                "requested_ns":1,"created_ns":2,"cut_ns":2,"ready_ns":3},"pause_ns":null,
                "pause_from_ns":null,"typical_gap_ns":null}]}"#,
        )
        .expect("local cut file");
        assert_eq!(f.members[0].taken.as_ref().and_then(|t| t.cut_ns), Some(2));
        let c: CbtFile = serde_json::from_str(
            r#"{"event":5,"op":"snapshot_allocated","volume":"v","snapshot":"s",
                "block_size":4096,"image_size":8192,"timing":{"first_range_ns":null,
                "total_ns":1,"ranges":0,"bytes":0,"ranges_per_s":0.0,"bytes_per_s":0.0,
                "read_bytes":0},"ranges":[]}"#,
        )
        .expect("local cbt file");
        assert_eq!(
            (c.op, c.block_size),
            (OpType::SnapshotAllocated, Some(4096))
        );
        assert!(
            c.notice().starts_with(
                "changed blocks (event 5, snapshot_allocated s, volume v): 0 ranges, 0.0 MiB, \
                 first range none, total "
            ) && c.notice().ends_with(" (cbt/5.json)"),
            "{}",
            c.notice()
        );
        // The kube provider's listing names its service, account and set-up times instead.
        let k = CbtFile {
            service: Some(CbtService {
                name: "svc".into(),
                address: "a:1".into(),
                audience: "aud".into(),
            }),
            account: Some("ns/sa".into()),
            setup: Some(CbtSetup::default()),
            ..c
        };
        let n = k.notice();
        assert!(
            n.starts_with("changed blocks (event 5, snapshot_allocated s, SnapshotMetadataService svc at a:1, as ns/sa): 0 ranges")
                && n.contains("; before the call: resolve ")
                && !n.contains("volume v"),
            "{n}"
        );
    }
}
