//! Decode and encode throughput of the JSON Lines and binary encodings, in events per second
//! on one core (criterion's "elements/s"), on the I/O-heavy sample trace.
//!
//! Run: `cargo bench -p trace-format --bench decode`

use std::hint::black_box;
use std::io::Cursor;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_format::{Encoding, Event, Trace, TraceReader, sample};

const N: usize = 200_000;

fn bench(c: &mut Criterion) {
    let trace = Trace {
        header: sample::header(),
        events: sample::events().take(N).collect::<Vec<Event>>(),
    };
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    for enc in [Encoding::Jsonl, Encoding::Binary] {
        let bytes = trace.to_bytes(enc).expect("encode");
        g.bench_function(enc.name(), |b| {
            b.iter(|| {
                let r = TraceReader::from_reader(Cursor::new(bytes.clone()), Some(enc), "bench")
                    .expect("header");
                let mut n = 0u64;
                for e in r {
                    black_box(e.expect("event"));
                    n += 1;
                }
                assert_eq!(n, N as u64);
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(20);
    for enc in [Encoding::Jsonl, Encoding::Binary] {
        g.bench_function(enc.name(), |b| {
            b.iter(|| black_box(trace.to_bytes(enc).expect("encode")));
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
