//! Deterministic workload generation: a seeded RNG, the per-job stream of (kind, offset,
//! length) for random or sequential patterns, and the open-loop arrival schedule.

use trace_format::{Arrival, BlockSize, IoKind, Pattern};

/// xoshiro256++ seeded through splitmix64: fast, small, and the same on every platform.
#[derive(Debug, Clone)]
pub(crate) struct Rng([u64; 4]);

use trace_format::splitmix::next as splitmix64;

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        let mut s = seed;
        Rng([
            splitmix64(&mut s),
            splitmix64(&mut s),
            splitmix64(&mut s),
            splitmix64(&mut s),
        ])
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let r = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }

    /// Uniform in `0..n` (n > 0), by 128-bit multiply (bias below 2^-64 · n).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in (0, 1].
    pub(crate) fn unit_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

/// One generated request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GenOp {
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
}

/// The request stream of one job over its slice of the region.
#[derive(Debug, Clone)]
pub(crate) struct OpGen {
    pattern: Pattern,
    read_pct: u8,
    /// (size, cumulative weight).
    sizes: Vec<(u64, u64)>,
    total_weight: u64,
    start: u64,
    len: u64,
    align: u64,
    pos: u64,
    rng: Rng,
}

impl OpGen {
    /// `sizes` are validated by the caller: non-empty, multiples of `align`, at most `len`.
    pub(crate) fn new(
        pattern: Pattern,
        read_pct: u8,
        bs: &BlockSize,
        start: u64,
        len: u64,
        align: u64,
        seed: u64,
    ) -> Self {
        let mut cum = 0;
        let sizes = block_sizes(bs)
            .into_iter()
            .map(|(s, w)| {
                cum += w;
                (s, cum)
            })
            .collect();
        OpGen {
            pattern,
            read_pct,
            sizes,
            total_weight: cum,
            start,
            len,
            align,
            pos: 0,
            rng: Rng::new(seed),
        }
    }

    pub(crate) fn next_op(&mut self) -> GenOp {
        let kind = match self.read_pct {
            100.. => IoKind::Read,
            0 => IoKind::Write,
            p => {
                if self.rng.below(100) < u64::from(p) {
                    IoKind::Read
                } else {
                    IoKind::Write
                }
            }
        };
        let len = if self.sizes.len() == 1 {
            self.sizes[0].0
        } else {
            let w = self.rng.below(self.total_weight);
            self.sizes
                .iter()
                .find(|(_, c)| w < *c)
                .map_or(self.sizes[0].0, |(s, _)| *s)
        };
        self.offset_for(kind, len)
    }

    /// Another offset for the same kind and length (verify mode re-draws around in-flight units).
    pub(crate) fn redraw(&mut self, op: GenOp) -> GenOp {
        self.offset_for(op.kind, op.len)
    }

    fn offset_for(&mut self, kind: IoKind, len: u64) -> GenOp {
        let offset = match self.pattern {
            Pattern::Random => {
                let slots = (self.len - len) / self.align + 1;
                self.start + self.rng.below(slots) * self.align
            }
            Pattern::Sequential => {
                if self.pos + len > self.len {
                    self.pos = 0;
                }
                let o = self.start + self.pos;
                self.pos += len;
                o
            }
        };
        GenOp { kind, offset, len }
    }
}

/// The (size, weight) entries of a block-size spec.
pub(crate) fn block_sizes(bs: &BlockSize) -> Vec<(u64, u64)> {
    match bs {
        BlockSize::Fixed(s) => vec![(*s, 1)],
        BlockSize::Mix(m) => m
            .iter()
            .filter(|e| e.weight > 0)
            .map(|e| (e.size, u64::from(e.weight)))
            .collect(),
    }
}

/// Open-loop intended start times of one job, in ns from the run's start.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    arrival: Arrival,
    period_ns: f64,
    phase_ns: f64,
    index: u64,
    next: f64,
    rng: Rng,
}

impl Schedule {
    /// `iops` is this job's share; `phase` (0..1) staggers jobs within one period.
    pub(crate) fn new(arrival: Arrival, iops: f64, phase: f64, seed: u64) -> Self {
        let period_ns = 1e9 / iops;
        let mut s = Schedule {
            arrival,
            period_ns,
            phase_ns: phase * period_ns,
            index: 0,
            next: 0.0,
            rng: Rng::new(seed),
        };
        s.next = match arrival {
            Arrival::Uniform => s.phase_ns,
            Arrival::Poisson => s.exp(),
        };
        s
    }

    fn exp(&mut self) -> f64 {
        -self.rng.unit_open0().ln() * self.period_ns
    }

    /// The next intended time (ns), without consuming it.
    pub(crate) fn peek(&self) -> u64 {
        self.next as u64
    }

    /// Consumes the next intended time.
    pub(crate) fn advance(&mut self) {
        self.index += 1;
        self.next = match self.arrival {
            // From the index, not by accumulation, so the rate never drifts.
            Arrival::Uniform => self.phase_ns + self.index as f64 * self.period_ns,
            Arrival::Poisson => self.next + self.exp(),
        };
    }
}
