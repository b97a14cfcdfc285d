//! Writes the deterministic sample trace: `sample N OUT` (encoding from OUT's name).
//! Used by `scripts/bench-convert-rss.sh` and handy for trying the CLI on big traces.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().ok_or("usage: sample N OUT")?.parse()?;
    let out = args.next().ok_or("usage: sample N OUT")?;
    let mut w = trace_format::TraceWriter::create(&out, None, &trace_format::sample::header())?;
    for e in trace_format::sample::events().take(n as usize) {
        w.write(&e)?;
    }
    w.finish()?;
    Ok(())
}
