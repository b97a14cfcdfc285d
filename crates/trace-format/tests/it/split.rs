//! `trace split` by lineage on generated traces: whatever the trace, the parts each pass the
//! checker and together hold every event but the markers exactly once (markers in each).

use proptest::prelude::*;
use trace_format::split::{By, SplitError, SplitOptions, split};
use trace_format::{Checker, Encoding, Event, Header, Op, Trace};

/// A valid trace from a list of choices: a small pool of names (so names are deleted and
/// made again), each choice made valid against the state (what is alive, what is mounted).
fn trace_of(choices: &[(u8, u8, u8)]) -> String {
    const V: usize = 5;
    let vol = |i: usize| format!("v{i}");
    let mut live_vol = [false; V];
    // The declared d0, mounted by the declared dw.
    let mut mounted_by: Vec<Option<usize>> = vec![None; V];
    let mut snaps: Vec<Option<usize>> = vec![None; 4]; // snapshot → its volume
    let mut groups: Vec<Option<Vec<usize>>> = vec![None; 2];
    let mut running: Vec<Option<Vec<usize>>> = vec![None; 4];
    let mut lines = vec![
        r#"{"format":"cnsreplay-trace","version":3,"defaults":{"volume_size":"1Gi"},"volumes":[{"name":"v0"},{"name":"v4"}],"workloads":[{"name":"w0","volumes":["v0"]}]}"#.to_owned(),
    ];
    live_vol[0] = true;
    live_vol[4] = true;
    mounted_by[0] = Some(0);
    running[0] = Some(vec![0]);
    let mut at = 0u64;
    for &(what, a, b) in choices {
        let (a, b) = (a as usize, b as usize);
        at += 1_000_000;
        let op = match what % 12 {
            0 => {
                let v = a % V;
                if live_vol[v] {
                    continue;
                }
                // Empty, a restore of a live snapshot, a clone of a live volume or a
                // restore of a group member.
                let source = match b % 4 {
                    1 => snaps
                        .iter()
                        .position(Option::is_some)
                        .map(|s| format!(r#","source":{{"snapshot":"s{s}"}}"#)),
                    2 => (0..V)
                        .find(|&x| live_vol[x])
                        .map(|x| format!(r#","source":{{"volume":"{}"}}"#, vol(x))),
                    3 => groups.iter().enumerate().find_map(|(g, m)| {
                        m.as_ref().map(|m| {
                            format!(
                                r#","source":{{"group_member":{{"group":"g{g}","volume":"{}"}}}}"#,
                                vol(m[b % m.len()])
                            )
                        })
                    }),
                    _ => None,
                };
                live_vol[v] = true;
                format!(
                    r#""create_volume":{{"volume":"{}"{}}}"#,
                    vol(v),
                    source.unwrap_or_default()
                )
            }
            1 => {
                let v = a % V;
                if !live_vol[v] || mounted_by[v].is_some() {
                    continue;
                }
                live_vol[v] = false;
                format!(r#""delete_volume":{{"volume":"{}"}}"#, vol(v))
            }
            2 => {
                let w = a % running.len();
                let vs: Vec<usize> = [b % V, (b / V) % V]
                    .into_iter()
                    .filter(|&v| live_vol[v] && mounted_by[v].is_none())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if running[w].is_some() {
                    continue;
                }
                for &v in &vs {
                    mounted_by[v] = Some(w);
                }
                let names: Vec<String> = vs.iter().map(|&v| format!("\"{}\"", vol(v))).collect();
                running[w] = Some(vs);
                format!(
                    r#""attach":{{"workload":"w{w}","volumes":[{}]}}"#,
                    names.join(",")
                )
            }
            3 => {
                let w = a % running.len();
                let Some(vs) = running[w].take() else {
                    continue;
                };
                for v in vs {
                    mounted_by[v] = None;
                }
                format!(r#""detach":{{"workload":"w{w}"}}"#)
            }
            4 => {
                let (v, s) = (a % V, b % snaps.len());
                if !live_vol[v] || snaps[s].is_some() {
                    continue;
                }
                snaps[s] = Some(v);
                format!(r#""snapshot":{{"volume":"{}","snapshot":"s{s}"}}"#, vol(v))
            }
            5 => {
                let s = a % snaps.len();
                if snaps[s].take().is_none() {
                    continue;
                }
                format!(r#""delete_snapshot":{{"snapshot":"s{s}"}}"#)
            }
            6 | 7 => {
                let v = a % V;
                if !live_vol[v] {
                    continue;
                }
                format!(
                    r#""io":{{"volume":"{}","kind":"write","offset":{},"len":4096}}"#,
                    vol(v),
                    (b as u64) * 4096
                )
            }
            8 => {
                let g = a % groups.len();
                let vs: std::collections::BTreeSet<usize> = [b % V, (b / V) % V]
                    .into_iter()
                    .filter(|&v| live_vol[v])
                    .collect();
                if groups[g].is_some() || vs.is_empty() {
                    continue;
                }
                let names: Vec<String> = vs.iter().map(|&v| format!("\"{}\"", vol(v))).collect();
                groups[g] = Some(vs.into_iter().collect());
                format!(
                    r#""group_snapshot":{{"group":"g{g}","volumes":[{}]}}"#,
                    names.join(",")
                )
            }
            9 => {
                let g = a % groups.len();
                if groups[g].take().is_none() {
                    continue;
                }
                format!(r#""delete_group_snapshot":{{"group":"g{g}"}}"#)
            }
            10 => format!(r#""marker":{{"name":"m{a}"}}"#),
            _ => format!(r#""cordon_node":{{"node":"n{}"}}"#, a % 2),
        };
        lines.push(format!(r#"{{"at":{at},{op}}}"#));
    }
    lines.join("\n") + "\n"
}

fn split_parts(t: &Trace, parts: usize) -> Result<Vec<(Header, Vec<Event>)>, SplitError> {
    let (sinks, _) = split(
        &t.header,
        t.events.clone().into_iter().map(Ok),
        t.events.clone().into_iter().map(Ok),
        SplitOptions {
            by: Some(By::Lineage),
            parts: Some(parts),
        },
        |_, h| Ok((h.clone(), Vec::new())),
        |s: &mut (Header, Vec<Event>), e| {
            s.1.push(e.clone());
            Ok(())
        },
    )?;
    Ok(sinks.into_values().collect())
}

fn findings(h: &Header, evs: &[Event]) -> Vec<String> {
    let (mut c, mut f) = Checker::new(h);
    for (i, e) in evs.iter().enumerate() {
        c.check(e, i as u64, &mut f);
    }
    f.iter()
        .map(|f| format!("{}: {}", f.path, f.problem))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn lineage_parts_validate_and_partition_the_events(
        choices in proptest::collection::vec((0u8..12, any::<u8>(), any::<u8>()), 0..120),
        parts in 1usize..5,
    ) {
        let text = trace_of(&choices);
        let t = Trace::from_bytes(text.as_bytes(), Some(Encoding::Jsonl)).expect("decode");
        let whole = findings(&t.header, &t.events);
        prop_assert!(whole.is_empty(), "the generator made an invalid trace: {whole:?}\n{text}");
        let got = match split_parts(&t, parts) {
            Ok(p) => p,
            Err(SplitError::TooFew { units, .. }) => {
                prop_assert!((units as usize) < parts);
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        };
        prop_assert_eq!(got.len(), parts);
        let markers: Vec<u64> = t.events.iter().filter(|e| matches!(e.op, Op::Marker(_))).map(|e| e.id).collect();
        let mut ids = Vec::new();
        let mut declared = Vec::new();
        for (h, evs) in &got {
            let f = findings(h, evs);
            prop_assert!(f.is_empty(), "a part does not replay: {f:?}\n{text}");
            let own: Vec<u64> = evs.iter().filter(|e| !matches!(e.op, Op::Marker(_))).map(|e| e.id).collect();
            // Each part has work of its own (when the trace has any).
            prop_assert!(!own.is_empty() || t.events.len() == markers.len());
            ids.extend(own);
            let m: Vec<u64> = evs.iter().filter(|e| matches!(e.op, Op::Marker(_))).map(|e| e.id).collect();
            prop_assert_eq!(&m, &markers);
            declared.extend(h.volumes.iter().map(|v| v.name.to_string()));
            declared.extend(h.workloads.iter().map(|w| w.name.to_string()));
        }
        ids.sort_unstable();
        let want: Vec<u64> = t.events.iter().filter(|e| !matches!(e.op, Op::Marker(_))).map(|e| e.id).collect();
        prop_assert_eq!(ids, want);
        declared.sort();
        prop_assert_eq!(declared, ["v0", "v4", "w0"]);
    }
}
