//! Reads a trace and prints it in every encoding (a debugging aid).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: smoke TRACE")?;
    let t = trace_format::Trace::read(&path)?;
    for enc in trace_format::Encoding::ALL {
        let bytes = t.to_bytes(enc)?;
        let back = trace_format::Trace::from_bytes(&bytes, Some(enc))?;
        assert_eq!(back, t, "{enc} round trip");
        if enc != trace_format::Encoding::Binary {
            std::io::Write::write_all(&mut std::io::stdout(), &bytes[..bytes.len().min(900)])?;
        }
        eprintln!("{enc}: {} bytes", bytes.len());
    }
    Ok(())
}
