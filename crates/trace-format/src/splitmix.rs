//! SplitMix64 (Steele, Lea and Flood, 2014): the one small, fixed, platform-independent
//! generator the workspace seeds with — synth's stream seeds, iogen's xoshiro state, the sim's
//! per-call draws, the CSI driver's injected latencies and analysis' resampling. Written once
//! here so every seeded draw that a test or a trace depends on comes from the same function.

/// The generator's increment (2^64 / φ).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The output for state `z` before its step: `mix(z + GAMMA)`, a stateless hash of `z`.
pub fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The next output of the generator whose state is `state`, which moves on by one step.
pub fn next(state: &mut u64) -> u64 {
    let out = splitmix64(*state);
    *state = state.wrapping_add(GAMMA);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference sequence of seed 0 (the published test vector).
    #[test]
    fn seed_zero_gives_the_reference_sequence() {
        let mut s = 0;
        assert_eq!(next(&mut s), 0xE220_A839_7B1D_CDAF);
        assert_eq!(next(&mut s), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(next(&mut s), 0x06C4_5D18_8009_454F);
        assert_eq!(s, GAMMA.wrapping_mul(3));
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }
}
