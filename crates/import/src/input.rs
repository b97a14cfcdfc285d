//! Inputs as users give them: a file, a pipe (`<(zcat x.gz)`, a FIFO), stdin (`-`), or a
//! gzip/zstd-compressed file. Importers that need two passes (every block format: the first
//! finds the devices and the start time the header declares) reopen their input; a pipe read
//! twice yields nothing the second time, which once made `convert` report "imported 0 events"
//! and exit 0. [`Inputs::prepare`] therefore spools what cannot be reopened — stdin, pipes,
//! character devices — and decompresses compressed input (detected by its magic bytes, not
//! its name) into a temporary directory that lives as long as the [`Inputs`], once, streaming;
//! plain files are read in place. Spooled sources keep the name the user gave in every
//! message and in the trace's provenance.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::{ImportError, Source};

/// What an input's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed (as far as the magic bytes tell).
    None,
    /// gzip (`1f 8b`), possibly several members (`cat a.gz b.gz`).
    Gzip,
    /// zstd (`28 b5 2f fd`).
    Zstd,
}

impl Compression {
    /// Detects compression from an input's first bytes.
    pub fn sniff(head: &[u8]) -> Self {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Prepared inputs: the spool directory (removed on drop) and how many were spooled.
#[derive(Debug)]
pub struct Inputs {
    dir: Option<tempfile::TempDir>,
    /// Inputs spooled (pipes, stdin, compressed files).
    pub spooled: usize,
}

impl Inputs {
    /// An empty set; the spool directory is made on first need.
    pub fn new() -> Self {
        Inputs {
            dir: None,
            spooled: 0,
        }
    }

    /// The source for `path` (`-` is stdin): the file itself when it is a regular,
    /// uncompressed file, else a spooled (and decompressed) copy named as given.
    pub fn prepare(&mut self, path: &Path) -> Result<Source, ImportError> {
        let name = if path == Path::new("-") {
            "<stdin>".to_owned()
        } else {
            path.display().to_string()
        };
        let (mut reader, regular): (Box<dyn BufRead>, bool) = if path == Path::new("-") {
            (Box::new(BufReader::new(std::io::stdin().lock())), false)
        } else {
            let f = fs_err::File::open(path)?;
            let regular = f.metadata()?.is_file();
            (Box::new(BufReader::with_capacity(256 << 10, f)), regular)
        };
        let compression = Compression::sniff(reader.fill_buf()?);
        if regular && compression == Compression::None {
            return Ok(Source::File(path.to_owned()));
        }
        let dest = self.spool_path()?;
        let named = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("{name}: {compression:?} input: {e}"))
        };
        let mut out = std::io::BufWriter::new(fs_err::File::create(&dest)?);
        let mut src: Box<dyn Read> = match compression {
            Compression::None => reader,
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(reader)),
            Compression::Zstd => {
                Box::new(zstd::stream::read::Decoder::with_buffer(reader).map_err(named)?)
            }
        };
        // A stream that does not decode is a problem of the input (exit 1), not of this
        // machine: told apart from a failed write of the spool.
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if is_corrupt(&e) => {
                    return Err(crate::BadInput {
                        file: name,
                        line: 0,
                        record: false,
                        field: String::new(),
                        message: format!("{compression:?} input does not decode: {e}"),
                    }
                    .into());
                }
                Err(e) => return Err(named(e).into()),
            };
            std::io::Write::write_all(&mut out, &buf[..n])?;
        }
        std::io::Write::flush(&mut out)?;
        self.spooled += 1;
        Ok(Source::Spooled { name, path: dest })
    }

    /// Prepares every path (see [`Inputs::prepare`]).
    pub fn prepare_all(&mut self, paths: &[PathBuf]) -> Result<Vec<Source>, ImportError> {
        paths.iter().map(|p| self.prepare(p)).collect()
    }

    fn spool_path(&mut self) -> Result<PathBuf, ImportError> {
        if self.dir.is_none() {
            self.dir = Some(
                tempfile::Builder::new()
                    .prefix("cnsreplay-input-")
                    .tempdir()?,
            );
        }
        let dir = self
            .dir
            .as_ref()
            .map(tempfile::TempDir::path)
            .unwrap_or(Path::new("."));
        Ok(dir.join(format!("{}.spool", self.spooled)))
    }
}

impl Default for Inputs {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a decoder's read error says its input is corrupt (not that reading failed): flate2
/// says so as invalid input or data, a truncated stream as an unexpected end, zstd as
/// `Other` (an error of the file system has its own kind).
fn is_corrupt(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{InvalidData, InvalidInput, Other, UnexpectedEof};
    matches!(e.kind(), InvalidData | InvalidInput | UnexpectedEof | Other)
}
