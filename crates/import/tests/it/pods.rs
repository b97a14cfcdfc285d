//! Pod lifecycle CSV import: lifetimes, censoring, traces, bad input, and the real Alibaba
//! GPU 2023 pod list in ../shared (skipped when absent).

use std::io::Cursor;
use std::path::PathBuf;

use import::Policy;
use import::pods::{Lifetime, lifetimes_trace, read_lifetimes, read_lifetimes_from};
use trace_format::{Encoding, OpType};

fn lifetimes(text: &str, policy: &Policy) -> Result<Vec<Lifetime>, import::ImportError> {
    read_lifetimes_from("pods.csv", Cursor::new(text.as_bytes().to_vec()), policy).map(|r| r.0)
}

const S: u64 = 1_000_000_000;

#[test]
fn alibaba_shape_and_censoring() {
    let csv = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
               a,1,1,1,1,,LS,Running,0,100,0\n\
               b,1,1,1,1,,LS,Failed,10,20,10\n\
               c,1,1,1,1,,LS,Running,50,100,50\n\
               d,1,1,1,1,,LS,Running,60,90,60\n\
               e,1,1,1,1,,LS,Pending,70,,\n";
    let l = lifetimes(csv, &Policy::default()).expect("read");
    let got: Vec<(&str, u64, u64, bool)> = l
        .iter()
        .map(|l| {
            (
                l.name.as_str(),
                l.start_ns / S,
                l.duration_ns / S,
                l.censored,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("a", 0, 100, true),
            ("b", 10, 10, false),
            ("c", 50, 50, true),
            ("d", 60, 30, false),
            ("e", 70, 30, true),
        ]
    );
}

#[test]
fn generic_shape_with_rfc3339_and_namespaces() {
    let csv = "name,creation_time,deletion_time,namespace\n\
               a,2024-01-01T00:00:10Z,2024-01-01T00:00:12.5Z,ns1\n\
               a,2024-01-01T00:00:00Z,2024-01-01T00:00:01Z,ns2\n\
               b,2024-01-01T00:00:11Z,,ns1\n";
    let l = lifetimes(csv, &Policy::default()).expect("read");
    assert_eq!(l[0].start_ns, 10 * S);
    assert_eq!(l[0].duration_ns, 2_500_000_000);
    assert_eq!(l[0].tenant.as_deref(), Some("ns1"));
    assert!(l[2].censored);
    assert_eq!(l[2].duration_ns, 1_500_000_000, "to the end of observation");
    let t = lifetimes_trace(&l, "pods.csv");
    let got: Vec<(u64, OpType, String)> = t
        .events
        .iter()
        .map(|e| {
            (
                e.at,
                e.op.op_type(),
                e.tenant.as_deref().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, OpType::Attach, "ns2".to_owned()),
            (S, OpType::Detach, "ns2".to_owned()),
            (10 * S, OpType::Attach, "ns1".to_owned()),
            (11 * S, OpType::Attach, "ns1".to_owned()),
            (12_500_000_000, OpType::Detach, "ns1".to_owned()),
        ]
    );
    let bytes = t.to_bytes(Encoding::Jsonl).expect("encode");
    let r = trace_format::check_trace(
        trace_format::TraceReader::from_reader(Cursor::new(bytes), None, "t").expect("decode"),
        "t",
        10,
        |_| {},
    )
    .expect("check");
    assert_eq!(r.problems, 0, "{:?}", r.diagnostics);
}

#[test]
fn headerless_numeric_and_zero_deletion() {
    let l = lifetimes("p,5,0\nq,0,0\nr,1.25,3\n", &Policy::default()).expect("read");
    assert!(
        l[0].censored,
        "deletion 0 after a creation at 5 means not deleted"
    );
    assert!(!l[1].censored);
    assert_eq!(l[1].duration_ns, 0);
    assert_eq!(l[2].start_ns, 1_250_000_000);
    assert_eq!(l[2].duration_ns, 1_750_000_000);
}

#[test]
fn bad_rows_are_located() {
    let csv = "name,creation_time,deletion_time\nok,1,2\nx,soon,3\ny,5,4\nz,2024-01-01T00:00:00Z,\nok,1,2\nw\n";
    let e = lifetimes(csv, &Policy::default()).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "pods.csv:3: creation_time: \"soon\" is neither seconds (e.g. 12.5) nor an RFC 3339 time"
    );
    let (l, report) = read_lifetimes_from(
        "pods.csv",
        Cursor::new(csv.as_bytes().to_vec()),
        &Policy {
            skip_bad: true,
            keep_first: 10,
        },
    )
    .expect("skip");
    assert_eq!(l.len(), 1);
    let located: Vec<String> = report
        .first_skipped
        .iter()
        .map(|b| format!("{}:{}", b.line, b.field))
        .collect();
    assert_eq!(
        located,
        [
            "3:creation_time",
            "4:deletion_time",
            "5:creation_time",
            "6:name",
            "7:creation_time"
        ]
    );
}

/// Expected numbers derived independently with python3 from the file: 8152 pods; the 34
/// `Running` pods whose deletion_time is the file's maximum (12902960 s) are censored.
#[test]
fn real_alibaba_gpu_pod_list() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/trace-samples/k8s-pod-lifecycle-csv/openb_pod_list_default.csv");
    if !path.exists() {
        #[expect(
            clippy::print_stderr,
            reason = "the skip note when ../shared is absent"
        )]
        {
            crate::require_samples(&path);
            eprintln!("skipped: {} does not exist", path.display());
        }
        return;
    }
    let (l, report) = read_lifetimes(&path, &Policy::default()).expect("read");
    assert_eq!(l.len(), 8152);
    assert_eq!(report.skipped, 0);
    assert_eq!(l.iter().filter(|l| l.censored).count(), 34);
    let first = &l[1];
    assert_eq!(
        (first.name.as_str(), first.start_ns, first.duration_ns),
        ("openb-pod-0001", 427_061 * S, (12_902_960 - 427_061) * S)
    );
    let (t, _) = import::pods::import_pods(&path, &Policy::default()).expect("trace");
    assert_eq!(t.events.len(), 8152 * 2 - 34);
}
