//! Writes the repo's A/A batches example for `analyze compare` (`analyze::compare::example`):
//! three batches of base runs on three days and one batch of "new" runs of the same system.
//!
//!   cargo run -p analyze --example gen_batches -- DIR
//!   cnsreplay analyze compare --skip p99.9 DIR/base-* -- DIR/new-*

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: gen_batches DIR")?;
    let (base, new) = analyze::compare::example::write_aa_batches(std::path::Path::new(&dir))?;
    use std::io::Write;
    writeln!(
        std::io::stdout().lock(),
        "{} base runs, {} new runs in {dir}",
        base.len(),
        new.len()
    )?;
    Ok(())
}
