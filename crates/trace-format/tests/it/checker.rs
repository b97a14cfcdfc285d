//! The semantic checker: every rule, with the exact message users see.

use trace_format::check::check_trace;
use trace_format::{Encoding, Problem, TraceReader};

fn check(jsonl: &str) -> Vec<String> {
    let r = TraceReader::from_reader(
        std::io::Cursor::new(jsonl.as_bytes().to_vec()),
        Some(Encoding::Jsonl),
        "t.jsonl",
    )
    .unwrap();
    let rep = check_trace(r, "t.jsonl", 100, |_| {}).unwrap();
    assert_eq!(rep.problems as usize, rep.diagnostics.len());
    rep.diagnostics.iter().map(ToString::to_string).collect()
}

const H: &str =
    r#"{"format":"cnsreplay-trace","version":1,"volumes":[{"name":"old","size":"1Gi"}]}"#;

fn trace(lines: &[&str]) -> String {
    let mut s = String::from(H);
    for l in lines {
        s.push('\n');
        s.push_str(l);
    }
    s
}

/// The issue's must-show: a dangling reference, a time inversion and an unknown field.
#[test]
fn three_located_errors() {
    let t = trace(&[
        r#"{"at":0,"id":1,"create_volume":{"volume":"pvc-7"}}"#,
        r#"{"at":12500000000,"id":2,"delete_volume":{"volume":"pvc-7"}}"#,
        r#"{"at":13000000000,"id":3,"attach":{"workload":"w","volumes":["pvc-7"]}}"#,
        r#"{"at":12000000000,"id":4,"marker":{"name":"m"}}"#,
        r#"{"at":14000000000,"id":5,"detach":{"workload":"w","force":true}}"#,
    ]);
    assert_eq!(
        check(&t),
        [
            r#"t.jsonl:4: events[2].attach.volumes[0]: volume "pvc-7" was deleted at t=12.5s"#,
            "t.jsonl:5: events[3].at: events out of time order: at=12s is before the previous event's at=13s",
            "t.jsonl:6: events[4].detach.force (column 57): unknown field `force`, expected `workload`",
        ]
    );
}

#[test]
fn valid_life_cycle_has_no_problems() {
    let t = trace(&[
        r#"{"at":0,"id":1,"create_volume":{"volume":"a","size":"2Gi"}}"#,
        r#"{"at":1,"id":2,"attach":{"workload":"w","volumes":["a","old"],"node":"n1"}}"#,
        r#"{"at":2,"id":3,"attach":{"workload":"w2","volumes":["a"],"node":"n1"}}"#,
        r#"{"at":3,"id":4,"io":{"volume":"a","kind":"write","offset":0,"len":4096}}"#,
        r#"{"at":4,"id":5,"snapshot":{"volume":"a","snapshot":"s"}}"#,
        r#"{"at":5,"id":6,"create_volume":{"volume":"b","size":"2Gi","source":{"snapshot":"s"}}}"#,
        r#"{"at":6,"id":7,"resize":{"volume":"a","size":"3Gi"}}"#,
        r#"{"at":7,"id":8,"io":{"volume":"a","kind":"read","offset":3221221376,"len":4096}}"#,
        r#"{"at":8,"id":9,"detach":{"workload":"w"}}"#,
        r#"{"at":8,"id":10,"abort_workload":{"workload":"w2"}}"#,
        r#"{"at":9,"id":11,"delete_volume":{"volume":"a"}}"#,
        r#"{"at":9,"id":12,"create_volume":{"volume":"a"}}"#,
        // A clone without a size gets its source's size (2 GiB, not the 1 GiB default).
        r#"{"at":10,"id":13,"create_volume":{"volume":"c","source":{"volume":"b"}}}"#,
        r#"{"at":11,"id":14,"io":{"volume":"c","kind":"write","offset":"2047Mi","len":"1Mi"}}"#,
    ]);
    assert_eq!(check(&t), Vec::<String>::new());
}

/// Declared workloads are running from the start: their volumes are mounted, a detach needs
/// no attach, and the volumes' access modes hold against later attaches.
#[test]
fn declared_workloads_run_from_the_start() {
    let h = r#"{"format":"cnsreplay-trace","version":1,"volumes":[{"name":"old","size":"1Gi"},{"name":"rwop","access_mode":"ReadWriteOncePod"}],"workloads":[{"name":"w0","volumes":["old"],"node":"n1"},{"name":"w1","volumes":["rwop"]},{"name":"bare"}]}"#;
    let t = [
        h,
        r#"{"at":0,"id":1,"attach":{"workload":"w2","volumes":["old"],"node":"n1"}}"#,
        r#"{"at":1,"id":2,"attach":{"workload":"w3","volumes":["old"],"node":"n2"}}"#,
        r#"{"at":2,"id":3,"io_phase":{"workload":"w0","volume":"old","pattern":"random","read_pct":50,"block_size":4096,"load":{"depth":1},"duration":"1s"}}"#,
        r#"{"at":3,"id":4,"detach":{"workload":"w0"}}"#,
        r#"{"at":3,"id":5,"detach":{"workload":"bare"}}"#,
        r#"{"at":4,"id":6,"delete_volume":{"volume":"rwop"}}"#,
        r#"{"at":5,"id":7,"detach":{"workload":"w1"}}"#,
        r#"{"at":6,"id":8,"delete_volume":{"volume":"rwop"}}"#,
    ]
    .join("\n");
    assert_eq!(
        check(&t),
        [
            r#"t.jsonl:3: events[1].attach.volumes[0]: volume "old" (ReadWriteOnce) is already attached by workload "w0""#,
            r#"t.jsonl:7: events[5].delete_volume.volume: volume "rwop" is still attached by workload "w1""#,
        ]
    );
}

/// A declared workload that names an undeclared volume, repeats a name or breaks an access
/// mode is a located error in the header.
#[test]
fn bad_declared_workloads_are_located_in_the_header() {
    let t = r#"{"format":"cnsreplay-trace","version":1,"volumes":[{"name":"old"},{"name":"pod","access_mode":"ReadWriteOncePod"}],"workloads":[{"name":"a","volumes":["old","pod"]},{"name":"b","volumes":["nope"]},{"name":"a"},{"name":"c","volumes":["pod","pod"]},{"name":"d","volumes":["old"],"node":"n2"}]}
{"at":0,"id":1,"detach":{"workload":"b"}}"#;
    assert_eq!(
        check(t),
        [
            r#"t.jsonl: header.workloads[1].volumes[0]: volume "nope" does not exist"#,
            r#"t.jsonl: header.workloads[2].name: workload "a" already exists"#,
            r#"t.jsonl: header.workloads[3].volumes[0]: volume "pod" (ReadWriteOncePod) is already attached by workload "a""#,
            r#"t.jsonl: header.workloads[3].volumes[1]: volume "pod" is listed twice"#,
            r#"t.jsonl: header.workloads[4].volumes[0]: volume "old" (ReadWriteOnce) is already attached by workload "a""#,
        ]
    );
}

#[test]
fn every_rule_reports_its_problem() {
    let t = trace(&[
        r#"{"at":0,"id":1,"create_volume":{"volume":"a","size":"2Gi"}}"#,
        r#"{"at":0,"id":1,"create_volume":{"volume":"a"}}"#,
        r#"{"at":1,"id":3,"attach":{"workload":"w","volumes":["a"]}}"#,
        r#"{"at":1,"id":4,"attach":{"workload":"x","volumes":["a"]}}"#,
        r#"{"at":2,"id":5,"delete_volume":{"volume":"a"}}"#,
        r#"{"at":3,"id":6,"resize":{"volume":"a","size":"1Gi"}}"#,
        r#"{"at":4,"id":7,"io":{"volume":"a","kind":"read","offset":2147483648,"len":1}}"#,
        r#"{"at":4,"id":8,"io":{"volume":"a","kind":"read","offset":18446744073709551615,"len":2}}"#,
        r#"{"at":5,"id":9,"snapshot":{"volume":"a","snapshot":"s"}}"#,
        r#"{"at":6,"id":10,"create_volume":{"volume":"c","size":"1Gi","source":{"snapshot":"s"}}}"#,
        r#"{"at":7,"id":11,"detach":{"workload":"nobody"}}"#,
        r#"{"at":8,"id":12,"delete_snapshot":{"snapshot":"nope"}}"#,
        r#"{"at":9,"id":13,"io_phase":{"workload":"w","volume":"old","pattern":"random","read_pct":101,"block_size":0,"load":{"depth":0},"jobs":0}}"#,
    ]);
    let got = check(&t);
    let want = [
        "t.jsonl:3: events[1].id: id 1 is not larger than the previous event's id 1",
        r#"t.jsonl:3: events[1].create_volume.volume: volume "a" already exists"#,
        r#"t.jsonl:5: events[3].attach.volumes[0]: volume "a" (ReadWriteOnce) is already attached by workload "w""#,
        r#"t.jsonl:6: events[4].delete_volume.volume: volume "a" is still attached by workload "w""#,
        r#"t.jsonl:7: events[5].resize.size: volume "a" cannot shrink or stay the same: resize to 1073741824 bytes from 2147483648 bytes"#,
        r#"t.jsonl:8: events[6].io.offset: bytes [2147483648, 2147483649) end past volume "a" of 2147483648 bytes"#,
        "t.jsonl:9: events[7].io.len: offset 18446744073709551615 + length 2 overflows 64 bits",
        "t.jsonl:11: events[9].create_volume.size: size 1073741824 bytes is smaller than the source's 2147483648 bytes",
        r#"t.jsonl:12: events[10].detach.workload: workload "nobody" is not running"#,
        r#"t.jsonl:13: events[11].delete_snapshot.snapshot: snapshot "nope" does not exist"#,
        r#"t.jsonl:14: events[12].io_phase.volume: workload "w" does not have volume "old" attached"#,
        "t.jsonl:14: events[12].io_phase.read_pct: 101 is more than 100",
        "t.jsonl:14: events[12].io_phase.block_size: block size must not be 0",
        "t.jsonl:14: events[12].io_phase.load.depth: queue depth must be at least 1",
        "t.jsonl:14: events[12].io_phase: give `duration` or `bytes` (or both: it stops at whichever comes first)",
        "t.jsonl:14: events[12].io_phase.jobs: jobs must be at least 1",
    ];
    assert_eq!(got, want);
}

#[test]
fn read_write_once_pod_never_shares_but_many_does() {
    let t = trace(&[
        r#"{"at":0,"id":1,"create_volume":{"volume":"p","access_mode":"ReadWriteOncePod"}}"#,
        r#"{"at":0,"id":2,"create_volume":{"volume":"m","access_mode":"ReadWriteMany"}}"#,
        r#"{"at":1,"id":3,"attach":{"workload":"a","volumes":["p","m"],"node":"n"}}"#,
        r#"{"at":1,"id":4,"attach":{"workload":"b","volumes":["p","m"],"node":"n"}}"#,
    ]);
    assert_eq!(
        check(&t),
        [
            r#"t.jsonl:5: events[3].attach.volumes[0]: volume "p" (ReadWriteOncePod) is already attached by workload "a""#
        ]
    );
}

#[test]
fn stats_count_rates_and_peaks() {
    let t = trace(&[
        r#"{"at":0,"id":1,"create_volume":{"volume":"a"}}"#,
        r#"{"at":100,"id":2,"create_volume":{"volume":"b"}}"#,
        r#"{"at":200,"id":3,"attach":{"workload":"w","volumes":["a","b","old"]}}"#,
        r#"{"at":1000000000,"id":4,"snapshot":{"volume":"a","snapshot":"s1"}}"#,
        r#"{"at":1000000001,"id":5,"snapshot":{"volume":"a","snapshot":"s2"}}"#,
        r#"{"at":1500000000,"id":6,"delete_snapshot":{"snapshot":"s1"}}"#,
        r#"{"at":2000000000,"id":7,"detach":{"workload":"w"}}"#,
        r#"{"at":4000000000,"id":8,"io":{"volume":"a","kind":"write","offset":0,"len":512}}"#,
    ]);
    let r = TraceReader::from_reader(std::io::Cursor::new(t.into_bytes()), None, "t").unwrap();
    let rep = check_trace(r, "t", 10, |_| {}).unwrap();
    let s = rep.stats;
    assert_eq!(s.events, 8);
    assert_eq!(s.duration_ns, 4_000_000_000);
    assert_eq!(s.mean_rate, 2.0);
    assert_eq!(s.peak_rate, 3);
    assert_eq!(s.peak_live_volumes, 3);
    assert_eq!(s.peak_attached_volumes, 3);
    assert_eq!(s.peak_live_snapshots, 2);
    assert_eq!(s.peak_running_workloads, 1);
    assert_eq!(s.io_write_bytes, 512);
    let snap = &s.ops[&trace_format::OpType::Snapshot];
    assert_eq!((snap.count, snap.peak_rate), (2, 2));
}

#[test]
fn problem_codes_are_stable() {
    let p = Problem::TimeInversion { at: 1, previous: 2 };
    assert_eq!(p.code(), "time_inversion");
}

proptest::proptest! {
    /// The two-pass busiest window (constant memory) finds the count and start that a brute
    /// force over every window starting at an event finds.
    #[test]
    fn the_busiest_window_matches_a_brute_force(
        mut gaps in proptest::collection::vec(0u64..50, 1..300),
        len in 1u64..200,
    ) {
        let mut t = 0;
        for g in &mut gaps {
            t += *g;
            *g = t;
        }
        let times = gaps;
        let ok = || times.iter().map(|t| Ok(*t));
        let (w, n) = trace_format::slice::busiest(ok(), ok(), len).unwrap().unwrap();
        let mut best = (0u64, 0u64);
        for &s in &times {
            let c = times.iter().filter(|&&x| x >= s && x - s < len).count() as u64;
            if c > best.1 {
                best = (s, c);
            }
        }
        proptest::prop_assert_eq!(n, best.1);
        proptest::prop_assert_eq!(w.from, best.0);
        proptest::prop_assert_eq!(w.to, best.0 + len);
    }
}

const H2: &str = r#"{"format":"cnsreplay-trace","version":2,"attributes_classes":{"gold":{"read_iops":2000,"write_iops":"2000"},"slow":{"write_bps":"10Mi"}},"volumes":[{"name":"old","size":"1Gi","attributes_class":"gold"}]}"#;

fn trace2(lines: &[&str]) -> String {
    let mut s = String::from(H2);
    for l in lines {
        s.push('\n');
        s.push_str(l);
    }
    s
}

#[test]
fn modify_volume_names_a_declared_class_and_a_live_volume() {
    // The header gains a volume whose class is not declared.
    let t = trace2(&[
        r#"{"at":0,"id":1,"create_volume":{"volume":"a"}}"#,
        r#"{"at":1,"id":2,"modify_volume":{"volume":"a","class":"slow"}}"#,
        r#"{"at":2,"id":3,"modify_volume":{"volume":"old","class":"silver"}}"#,
        r#"{"at":3,"id":4,"delete_volume":{"volume":"a"}}"#,
        r#"{"at":4,"id":5,"modify_volume":{"volume":"a","class":"gold"}}"#,
    ])
    .replacen(
        r#""gold"}]}"#,
        r#""gold"},{"name":"odd","attributes_class":"platinum"}]}"#,
        1,
    );
    assert_eq!(
        check(&t),
        [
            r#"t.jsonl: header.volumes[1].attributes_class: attributes class "platinum" does not exist"#,
            r#"t.jsonl:4: events[2].modify_volume.class: attributes class "silver" does not exist"#,
            r#"t.jsonl:6: events[4].modify_volume.volume: volume "a" was deleted at t=0.000000003s"#,
        ]
    );
}

#[test]
fn version_1_traces_cannot_use_what_version_2_added() {
    let t = [
        r#"{"format":"cnsreplay-trace","version":1,"attributes_classes":{"gold":{}},"volumes":[{"name":"v","attributes_class":"gold"}]}"#,
        r#"{"at":0,"id":1,"modify_volume":{"volume":"v","class":"gold"}}"#,
    ]
    .join("\n");
    assert_eq!(
        check(&t),
        [
            "t.jsonl: header.attributes_classes: `attributes_classes` needs format version 2 or later; this trace says version 1",
            "t.jsonl: header.volumes[0].attributes_class: `attributes_class` needs format version 2 or later; this trace says version 1",
            "t.jsonl:2: events[0].modify_volume: `modify_volume` needs format version 2 or later; this trace says version 1",
        ]
    );
}

/// Kubernetes' recovery from a failed expansion: after a resize, the request may go down
/// again, but only above the size before it.
#[test]
fn a_resize_may_lower_the_request_of_the_one_before_only_above_the_old_size() {
    let t = trace2(&[
        r#"{"at":0,"id":1,"resize":{"volume":"old","size":"100Gi"}}"#,
        r#"{"at":1,"id":2,"resize":{"volume":"old","size":"1Gi"}}"#,
        r#"{"at":2,"id":3,"resize":{"volume":"old","size":"2Gi"}}"#,
        r#"{"at":3,"id":4,"resize":{"volume":"old","size":"1536Mi"}}"#,
        r#"{"at":4,"id":5,"create_volume":{"volume":"b","size":"1Gi"}}"#,
        r#"{"at":5,"id":6,"resize":{"volume":"b","size":"512Mi"}}"#,
    ]);
    assert_eq!(
        check(&t),
        [
            r#"t.jsonl:3: events[1].resize.size: volume "old": lowering the request from 107374182400 to 1073741824 bytes is a recovery from a failed resize only when it stays above 1073741824 bytes, the size before that resize"#,
            r#"t.jsonl:7: events[5].resize.size: volume "b" cannot shrink or stay the same: resize to 536870912 bytes from 1073741824 bytes"#,
        ]
    );
}

#[test]
fn group_snapshots_take_live_volumes_and_restore_their_members() {
    let t = trace2(&[
        r#"{"at":0,"id":1,"create_volume":{"volume":"data","size":"2Gi"}}"#,
        r#"{"at":1,"id":2,"create_volume":{"volume":"wal"}}"#,
        r#"{"at":2,"id":3,"group_snapshot":{"group":"g","volumes":["data","wal","old"]}}"#,
        r#"{"at":3,"id":4,"create_volume":{"volume":"data-r","source":{"group_member":{"group":"g","volume":"data"}}}}"#,
        r#"{"at":4,"id":5,"create_volume":{"volume":"wal-r","size":"512Mi","source":{"group_member":{"group":"g","volume":"wal"}}}}"#,
        r#"{"at":5,"id":6,"create_volume":{"volume":"x","source":{"group_member":{"group":"g","volume":"nope"}}}}"#,
        r#"{"at":6,"id":7,"group_snapshot":{"group":"g","volumes":["data","data","gone"]}}"#,
        r#"{"at":7,"id":8,"group_snapshot":{"group":"h","volumes":[]}}"#,
        r#"{"at":8,"id":9,"delete_group_snapshot":{"group":"g"}}"#,
        r#"{"at":9,"id":10,"delete_group_snapshot":{"group":"g"}}"#,
        r#"{"at":10,"id":11,"create_volume":{"volume":"y","source":{"group_member":{"group":"g","volume":"data"}}}}"#,
    ]);
    assert_eq!(
        check(&t),
        [
            r#"t.jsonl:6: events[4].create_volume.size: size 536870912 bytes is smaller than the source's 1073741824 bytes"#,
            r#"t.jsonl:7: events[5].create_volume.source.group_member.volume: volume "nope" is not a member of group snapshot "g""#,
            r#"t.jsonl:8: events[6].group_snapshot.volumes[1]: volume "data" is listed twice"#,
            r#"t.jsonl:8: events[6].group_snapshot.volumes[2]: volume "gone" does not exist"#,
            r#"t.jsonl:8: events[6].group_snapshot.group: group snapshot "g" already exists"#,
            r#"t.jsonl:9: events[7].group_snapshot.volumes: a group snapshot needs at least one volume"#,
            r#"t.jsonl:11: events[9].delete_group_snapshot.group: group snapshot "g" was deleted at t=0.000000008s"#,
            r#"t.jsonl:12: events[10].create_volume.source.group_member.group: group snapshot "g" was deleted at t=0.000000008s"#,
        ]
    );
}

#[test]
fn ordered_phases_write_a_log_that_a_check_of_as_many_volumes_names() {
    let ev = [
        r#"{"at":0,"id":1,"attach":{"workload":"db","volumes":["a","b","c"]}}"#,
        r#"{"at":1,"id":2,"io_phase":{"workload":"db","volume":"a","pattern":"random","read_pct":0,"block_size":4096,"load":{"depth":1},"duration":"1s","ordered":{"log":"ow","with":["b","c"]}}}"#,
        r#"{"at":2,"id":3,"io_phase":{"workload":"db","volume":"a","pattern":"random","read_pct":100,"block_size":4096,"load":{"depth":1},"ordered":{"log":"ow","with":["b","c"]}}}"#,
        r#"{"at":3,"id":4,"io_phase":{"workload":"db","volume":"a","pattern":"random","read_pct":100,"block_size":4096,"load":{"depth":1},"ordered":{"log":"ow","with":["b"]}}}"#,
        r#"{"at":4,"id":5,"io_phase":{"workload":"db","volume":"a","pattern":"random","read_pct":100,"block_size":4096,"load":{"depth":1},"ordered":{"log":"nope","with":["b","c"]}}}"#,
        r#"{"at":5,"id":6,"io_phase":{"workload":"db","volume":"a","pattern":"random","read_pct":50,"block_size":[{"size":4096,"weight":1}],"load":{"rate":{"iops":10.0}},"duration":"1s","jobs":2,"ordered":{"log":"x","with":["a","old"]}}}"#,
    ];
    let mut lines = vec![
        r#"{"at":0,"id":0,"create_volume":{"volume":"a"}}"#,
        r#"{"at":0,"id":0,"create_volume":{"volume":"b"}}"#,
        r#"{"at":0,"id":0,"create_volume":{"volume":"c"}}"#,
    ];
    lines.extend(ev);
    // Ids: the three creates share id 0 in the list above; number them.
    let t: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let at = l.find(r#""id":"#).unwrap_or(0);
            let end = at + l[at..].find(',').unwrap_or(0);
            format!("{}\"id\":{i}{}", &l[..at], &l[end..])
        })
        .collect();
    let refs: Vec<&str> = t.iter().map(String::as_str).collect();
    let v3 = trace(&refs).replacen(r#""version":1"#, r#""version":3"#, 1);
    assert_eq!(
        check(&v3),
        [
            r#"t.jsonl:8: events[6].io_phase.ordered.with: the log "ow" covers 3 volumes; this check names 2"#,
            r#"t.jsonl:9: events[7].io_phase.ordered.log: ordered-write log "nope" does not exist"#,
            r#"t.jsonl:10: events[8].io_phase.read_pct: an ordered phase writes (0) or checks (100), not 50"#,
            r#"t.jsonl:10: events[8].io_phase.block_size: ordered writes use one block size"#,
            r#"t.jsonl:10: events[8].io_phase.load: ordered writes run closed-loop: `depth` is the number of writers"#,
            r#"t.jsonl:10: events[8].io_phase.jobs: an ordered phase has one job (`load.depth` sets its writers)"#,
            r#"t.jsonl:10: events[8].io_phase.ordered.with[0]: volume "a" is listed twice"#,
            r#"t.jsonl:10: events[8].io_phase.ordered.with[1]: workload "db" does not have volume "old" attached"#,
        ]
    );
    // The same in a version-2 trace: `ordered` is refused where it appears.
    let v2 = trace(&refs[..5]).replacen(r#""version":1"#, r#""version":2"#, 1);
    assert_eq!(
        check(&v2),
        [
            r#"t.jsonl:6: events[4].io_phase.ordered: `ordered` needs format version 3 or later; this trace says version 2"#,
        ]
    );
}

/// `attach.wait_for_room` (version 3): read and kept in a version-3 trace, refused where it
/// appears in an older one; an attach without it reads as before.
#[test]
fn wait_for_room_is_version_3() {
    let lines = [
        r#"{"at":0,"id":1,"create_volume":{"volume":"a"}}"#,
        r#"{"at":1,"id":2,"attach":{"workload":"w","volumes":["a"],"wait_for_room":true}}"#,
        r#"{"at":2,"id":3,"detach":{"workload":"w"}}"#,
        r#"{"at":3,"id":4,"attach":{"workload":"w","volumes":["a"]}}"#,
    ];
    let v3 = trace(&lines).replacen(r#""version":1"#, r#""version":3"#, 1);
    assert!(check(&v3).is_empty(), "{:?}", check(&v3));
    let v2 = trace(&lines).replacen(r#""version":1"#, r#""version":2"#, 1);
    assert_eq!(
        check(&v2),
        [
            r#"t.jsonl:3: events[1].attach.wait_for_room: `wait_for_room` needs format version 3 or later; this trace says version 2"#,
        ]
    );
}

/// Changed-block tracking (version 3): the snapshots must be alive, a delta's two of one
/// volume (not a later volume of the same name) and in the order taken, block sizes sane.
#[test]
fn changed_block_ops_name_live_snapshots_of_one_volume() {
    let lines = [
        r#"{"at":0,"id":1,"create_volume":{"volume":"a"}}"#,
        r#"{"at":1,"id":2,"snapshot":{"volume":"a","snapshot":"s1"}}"#,
        r#"{"at":2,"id":3,"snapshot":{"volume":"a","snapshot":"s2"}}"#,
        r#"{"at":3,"id":4,"snapshot":{"volume":"old","snapshot":"o1"}}"#,
        r#"{"at":4,"id":5,"snapshot_allocated":{"snapshot":"s1","block_size":"4Ki"}}"#,
        r#"{"at":5,"id":6,"snapshot_delta":{"base":"s1","snapshot":"s2"}}"#,
        // Errors from here on.
        r#"{"at":6,"id":7,"snapshot_delta":{"base":"s1","snapshot":"o1"}}"#,
        r#"{"at":7,"id":8,"snapshot_delta":{"base":"s2","snapshot":"s1"}}"#,
        r#"{"at":8,"id":9,"snapshot_delta":{"base":"s1","snapshot":"s1","block_size":1000}}"#,
        r#"{"at":9,"id":10,"delete_snapshot":{"snapshot":"s2"}}"#,
        r#"{"at":10,"id":11,"snapshot_allocated":{"snapshot":"s2"}}"#,
        r#"{"at":11,"id":12,"snapshot_delta":{"base":"nope","snapshot":"s2"}}"#,
        r#"{"at":12,"id":13,"delete_volume":{"volume":"a"}}"#,
        r#"{"at":13,"id":14,"create_volume":{"volume":"a"}}"#,
        r#"{"at":14,"id":15,"snapshot":{"volume":"a","snapshot":"s3"}}"#,
        r#"{"at":15,"id":16,"snapshot_delta":{"base":"s1","snapshot":"s3"}}"#,
    ];
    let v3 = trace(&lines).replacen(r#""version":1"#, r#""version":3"#, 1);
    assert_eq!(
        check(&v3),
        [
            r#"t.jsonl:8: events[6].snapshot_delta.snapshot: snapshots "s1" and "o1" are of volumes "a" and "old"; a delta needs two snapshots of one volume"#,
            r#"t.jsonl:9: events[7].snapshot_delta.base: base "s2" was taken after snapshot "s1"; the base is the earlier one"#,
            r#"t.jsonl:10: events[8].snapshot_delta.block_size: block size 1000 is not a power of two of at least 512 bytes"#,
            r#"t.jsonl:10: events[8].snapshot_delta.snapshot: the delta of snapshot "s1" with itself: name two snapshots"#,
            r#"t.jsonl:12: events[10].snapshot_allocated.snapshot: snapshot "s2" was deleted at t=0.000000009s"#,
            r#"t.jsonl:13: events[11].snapshot_delta.base: snapshot "nope" does not exist"#,
            r#"t.jsonl:13: events[11].snapshot_delta.snapshot: snapshot "s2" was deleted at t=0.000000009s"#,
            r#"t.jsonl:17: events[15].snapshot_delta.snapshot: snapshots "s1" and "s3" are of two volumes named "a" (it was deleted and made again between them); a delta needs two snapshots of one volume"#,
        ]
    );
    // Version 2 and 1 traces: the ops are refused by name.
    for v in [1, 2] {
        let old = trace(&lines[..6]).replacen(r#""version":1"#, &format!(r#""version":{v}"#), 1);
        assert_eq!(
            check(&old),
            [
                format!(
                    "t.jsonl:6: events[4].snapshot_allocated: `snapshot_allocated` needs format version 3 or later; this trace says version {v}"
                ),
                format!(
                    "t.jsonl:7: events[5].snapshot_delta: `snapshot_delta` needs format version 3 or later; this trace says version {v}"
                ),
            ]
        );
    }
}
