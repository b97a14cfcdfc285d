use iogen::{EngineChoice, Load, Pattern, PhaseSpec, Stop, run_phase};

use crate::{opts, spec, target};

fn counts(s: &PhaseSpec, engine: EngineChoice) -> (u64, u64, String) {
    let (_d, p) = target();
    let r = run_phase(s, &p, &opts(engine), &Stop::new()).expect("run_phase");
    assert!(!r.partial);
    assert_eq!(r.summary.errors, 0, "{:?}", r.summary);
    let k = |n: &str| r.summary.kinds.get(n).map_or(0, |k| k.ios);
    assert_eq!(r.histograms.total_count(), k("read") + k("write"));
    (k("read"), k("write"), r.summary.engine.engine)
}

#[test]
fn closed_loop_returns_requested_ios_per_kind() {
    for (read_pct, reads, writes) in [(100u8, 500u64, 0u64), (0, 0, 500)] {
        let s = PhaseSpec {
            read_pct,
            ios: Some(500),
            load: Load::Depth(8),
            ..spec()
        };
        let (r, w, engine) = counts(&s, EngineChoice::Auto);
        assert_eq!((r, w), (reads, writes), "read_pct {read_pct} on {engine}");
    }
    let s = PhaseSpec {
        read_pct: 30,
        ios: Some(1000),
        load: Load::Depth(4),
        jobs: 3,
        ..spec()
    };
    let (r, w, _) = counts(&s, EngineChoice::Auto);
    assert_eq!(r + w, 1000);
    assert!(r > 150 && r < 450, "about 30% reads, got {r}");
}

#[test]
fn sync_engine_gives_the_same_counts_as_io_uring() {
    for pattern in [Pattern::Random, Pattern::Sequential] {
        let s = PhaseSpec {
            pattern,
            read_pct: 60,
            ios: Some(2000),
            load: Load::Depth(16),
            jobs: 2,
            direct: true,
            ..spec()
        };
        let a = counts(&s, EngineChoice::IoUring);
        let b = counts(&s, EngineChoice::Sync);
        assert_eq!(a.2, "io_uring");
        assert_eq!(b.2, "sync");
        assert_eq!((a.0, a.1), (b.0, b.1), "{pattern:?}");
    }
}

#[test]
fn bytes_bound_and_stop_request() {
    let s = PhaseSpec {
        read_pct: 0,
        bytes: Some(1 << 20),
        ..spec()
    };
    let (_d, p) = target();
    let r = run_phase(&s, &p, &opts(EngineChoice::Auto), &Stop::new()).expect("run");
    assert_eq!(r.summary.bytes, 1 << 20);
    let stop = Stop::new();
    stop.request();
    let s = PhaseSpec {
        duration: Some(std::time::Duration::from_secs(3600)),
        ..spec()
    };
    let r = run_phase(&s, &p, &opts(EngineChoice::Auto), &stop).expect("run");
    assert!(r.partial && r.summary.partial);
}

#[test]
fn invalid_specs_name_the_field() {
    let (_d, p) = target();
    let bad = [
        (
            PhaseSpec {
                read_pct: 101,
                ios: Some(1),
                ..spec()
            },
            "read_pct",
        ),
        (
            PhaseSpec {
                jobs: 0,
                ios: Some(1),
                ..spec()
            },
            "jobs",
        ),
        (PhaseSpec { ..spec() }, "duration"),
        (
            PhaseSpec {
                load: Load::Depth(0),
                ios: Some(1),
                ..spec()
            },
            "load.depth",
        ),
        (
            PhaseSpec {
                block_size: iogen::BlockSize::Fixed(1000),
                direct: true,
                ios: Some(1),
                ..spec()
            },
            "block_size",
        ),
    ];
    for (s, field) in bad {
        match run_phase(&s, &p, &opts(EngineChoice::Auto), &Stop::new()) {
            Err(iogen::Error::InvalidSpec { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected InvalidSpec, got {other:?}"),
        }
        assert!(
            !p.exists(),
            "{field}: a refused phase must not lay out its target"
        );
    }
}

#[test]
fn phase_from_trace_snippet() {
    let p = iogen::parse_phase_snippet("{pattern: sequential, read_pct: 0, block_size: 8Ki, load: {depth: 2}, bytes: 64Ki, region: 1Mi}").expect("snippet");
    let s = PhaseSpec::from_trace(&p);
    assert_eq!(s.pattern, Pattern::Sequential);
    assert_eq!(s.bytes, Some(64 << 10));
    let (_d, path) = target();
    let r = run_phase(&s, &path, &opts(EngineChoice::Auto), &Stop::new()).expect("run");
    assert_eq!(r.summary.kinds["write"].ios, 8);
    let block = iogen::parse_phase_snippet(
        "pattern: random\nread_pct: 100\nblock_size: 4Ki\nload: {rate: {iops: 100}}\nduration: 1s",
    )
    .expect("block snippet");
    assert!(matches!(block.load, Load::Rate(_)));
}
