use std::time::{Duration, Instant};

use iogen::{EngineChoice, Error, IoKind, IoRequest, start_stream};

use crate::{opts, target};

#[test]
fn stream_runs_every_request() {
    for engine in [EngineChoice::Auto, EngineChoice::Sync] {
        let (_d, p) = target();
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
        let (tx, h) = start_stream(&p, true, &opts(engine)).expect("start");
        let t0 = Instant::now();
        let tx2 = tx.clone();
        for i in 0..100u64 {
            let intended = t0 + Duration::from_micros(100 * i);
            tx.submit(IoRequest {
                kind: IoKind::Write,
                offset: i * 4096,
                len: 4096,
                intended,
            })
            .expect("submit");
            tx2.submit(IoRequest {
                kind: IoKind::Read,
                offset: i * 4096,
                len: 8192,
                intended,
            })
            .expect("submit");
        }
        tx.submit(IoRequest {
            kind: IoKind::Flush,
            offset: 0,
            len: 0,
            intended: t0,
        })
        .expect("flush");
        // Longer than the stream's buffers: rejected and counted.
        tx.submit(IoRequest {
            kind: IoKind::Read,
            offset: 0,
            len: 64 << 20,
            intended: t0,
        })
        .expect("queued");
        drop((tx, tx2));
        let r = h.finish().expect("finish");
        let k = |n: &str| r.summary.kinds.get(n).map_or(0, |k| k.ios);
        assert_eq!(
            (k("write"), k("read"), k("flush")),
            (100, 100, 1),
            "{engine:?}"
        );
        assert_eq!(r.errors, 1);
        assert_eq!(
            r.histograms.get(IoKind::Read).map(|h| h.response.len()),
            Some(100)
        );
    }
}

#[test]
fn full_queue_is_an_error_not_a_block() {
    let (_d, p) = target();
    std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
    let (tx, h) = start_stream(&p, false, &opts(EngineChoice::Auto)).expect("start");
    // Far in the future, so nothing drains while we fill the queue.
    let later = Instant::now() + Duration::from_secs(3600);
    let mut full = false;
    for _ in 0..(iogen::STREAM_QUEUE * 3) {
        match tx.submit(IoRequest {
            kind: IoKind::Read,
            offset: 0,
            len: 4096,
            intended: later,
        }) {
            Ok(()) => {}
            Err(Error::QueueFull) => {
                full = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    h.stop();
    drop(tx);
    let r = h.finish().expect("finish");
    assert!(full, "queue never filled");
    assert!(r.summary.partial);
}
