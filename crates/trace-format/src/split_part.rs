//! Which split a trace is a part of: `trace split` stamps each part's header, and a merge of
//! the parts' runs (`replay::merge_runs`) reads the stamp to tell the parts of one trace from
//! runs that do not belong together.
//!
//! The stamp lives in the header's free-form `provenance.parameters`, so it needs no format
//! change and round-trips through every encoding: `split.of` is the SHA-256 of the file that
//! was split (hex), `split.part` the part's 1-based number and `split.parts` how many parts
//! the split made. The original's hash is set on the header before splitting
//! ([`stamp_original`]), the part's number when each part's header is made ([`stamp_part`]).
//! A header with an incomplete or malformed stamp is not a split part ([`split_part`]).

use crate::model::Header;

/// `provenance.parameters` key: SHA-256 of the trace that was split.
pub const OF: &str = "split.of";
/// `provenance.parameters` key: the part's number, from 1.
pub const PART: &str = "split.part";
/// `provenance.parameters` key: how many parts the split made.
pub const PARTS: &str = "split.parts";

/// A trace's place in a split: part `part` of `parts` of the trace whose SHA-256 is `of`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitPart {
    /// SHA-256 of the trace that was split, hex.
    pub of: String,
    /// The part's number, 1 ..= `parts`.
    pub part: u32,
    /// How many parts the split made.
    pub parts: u32,
}

/// Records in `header` (the trace about to be split) the SHA-256 of its file; every part's
/// header is made from it and keeps it.
pub fn stamp_original(header: &mut Header, sha256: &str) {
    header
        .provenance
        .parameters
        .insert(OF.to_owned(), sha256.to_owned());
}

/// Records in a part's header its number `index` (0-based) among `count` parts.
pub fn stamp_part(header: &mut Header, index: usize, count: usize) {
    let p = &mut header.provenance.parameters;
    p.insert(PART.to_owned(), (index + 1).to_string());
    p.insert(PARTS.to_owned(), count.to_string());
}

/// The split `header` is a part of; `None` when it carries no complete, well-formed stamp.
pub fn split_part(header: &Header) -> Option<SplitPart> {
    let p = &header.provenance.parameters;
    let of = p.get(OF)?;
    let part: u32 = p.get(PART)?.parse().ok()?;
    let parts: u32 = p.get(PARTS)?.parse().ok()?;
    (!of.is_empty() && (1..=parts).contains(&part)).then(|| SplitPart {
        of: of.clone(),
        part,
        parts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Encoding, Trace};

    #[test]
    fn a_stamped_header_reads_back_through_every_encoding() {
        let mut t = Trace::from_bytes(
            b"format: cnsreplay-trace\nversion: 3\nevents: []\n",
            Some(Encoding::Yaml),
        )
        .expect("trace");
        assert_eq!(split_part(&t.header), None);
        stamp_original(&mut t.header, "ab12");
        assert_eq!(split_part(&t.header), None, "no part number yet");
        stamp_part(&mut t.header, 1, 3);
        let want = SplitPart {
            of: "ab12".into(),
            part: 2,
            parts: 3,
        };
        for enc in [Encoding::Yaml, Encoding::Jsonl, Encoding::Binary] {
            let bytes = t.to_bytes(enc).expect("encode");
            let back = Trace::from_bytes(&bytes, Some(enc)).expect("decode");
            assert_eq!(split_part(&back.header), Some(want.clone()), "{enc:?}");
        }
    }

    #[test]
    fn a_malformed_stamp_is_not_a_part() {
        let mut h = Header::default();
        stamp_original(&mut h, "ab12");
        stamp_part(&mut h, 0, 2);
        h.provenance
            .parameters
            .insert(PART.to_owned(), "3".to_owned());
        assert_eq!(split_part(&h), None, "part 3 of 2");
        h.provenance
            .parameters
            .insert(PART.to_owned(), "one".to_owned());
        assert_eq!(split_part(&h), None);
    }
}
