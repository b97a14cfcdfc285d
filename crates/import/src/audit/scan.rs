//! A structural scan of one JSON object line: its top-level members as raw byte slices.
//!
//! Why: an API server's audit log is mostly reads, watches and status writes of objects that
//! mean nothing for storage, and parsing each such line into a `serde_json::Value` cost ~8 µs
//! (124 k lines/s). The scan only finds where each top-level value starts and ends — strings
//! are crossed with `memchr`, nested values by bracket depth — so a line can be classified
//! from a handful of short values (`stage`, `verb`, `objectRef`, `responseStatus`) and only
//! the storage requests have their bodies parsed. It relies on nothing about key order or
//! formatting, so it reads logs that were re-serialized by log shippers. It does not
//! validate the values it skips: a line whose structure it cannot follow is reported as not
//! JSON, and the values it hands out are parsed by `serde_json`, which does validate them.

/// Why a line is not a JSON object the scan can follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ScanError {
    /// Byte offset in the line.
    pub at: usize,
    /// What was expected there.
    pub expected: &'static str,
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "expected {} at byte {}", self.expected, self.at + 1)
    }
}

/// A member: its name's raw bytes and its value's bytes.
pub(super) type Member<'a> = (&'a [u8], &'a [u8]);

/// The top-level members of a JSON object: `(key, value)` with the key's raw bytes (between
/// its quotes, escapes left as they are) and the value's bytes (a string keeps its quotes).
#[cfg(test)]
pub(super) fn members(line: &[u8]) -> Result<Vec<Member<'_>>, ScanError> {
    let mut out = Vec::with_capacity(24);
    members_into(line, &mut out).map(|()| out)
}

/// [`members`] into `out` (cleared first), so a caller can keep one allocation for every line.
pub(super) fn members_into<'a>(line: &'a [u8], out: &mut Vec<Member<'a>>) -> Result<(), ScanError> {
    out.clear();
    let mut i = ws(line, 0);
    expect(line, i, b'{', "'{'")?;
    i = ws(line, i + 1);
    if line.get(i) == Some(&b'}') {
        return end(line, i + 1);
    }
    loop {
        expect(line, i, b'"', "a member name")?;
        let k_end = string_end(line, i)?;
        let key = &line[i + 1..k_end - 1];
        i = ws(line, k_end);
        expect(line, i, b':', "':'")?;
        i = ws(line, i + 1);
        let v_end = value_end(line, i)?;
        out.push((key, &line[i..v_end]));
        i = ws(line, v_end);
        match line.get(i) {
            Some(b',') => i = ws(line, i + 1),
            Some(b'}') => return end(line, i + 1),
            _ => {
                return Err(ScanError {
                    at: i,
                    expected: "',' or '}'",
                });
            }
        }
    }
}

fn end(line: &[u8], i: usize) -> Result<(), ScanError> {
    let j = ws(line, i);
    if j == line.len() {
        Ok(())
    } else {
        Err(ScanError {
            at: j,
            expected: "the end of the line",
        })
    }
}

fn ws(line: &[u8], mut i: usize) -> usize {
    while matches!(line.get(i), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        i += 1;
    }
    i
}

fn expect(line: &[u8], i: usize, b: u8, what: &'static str) -> Result<(), ScanError> {
    if line.get(i) == Some(&b) {
        Ok(())
    } else {
        Err(ScanError {
            at: i,
            expected: what,
        })
    }
}

/// The end (exclusive, after the closing quote) of the string starting at `start` (a quote).
fn string_end(line: &[u8], start: usize) -> Result<usize, ScanError> {
    let mut i = start + 1;
    loop {
        match memchr::memchr2(b'"', b'\\', &line[i.min(line.len())..]) {
            Some(off) => {
                let j = i + off;
                if line[j] == b'"' {
                    return Ok(j + 1);
                }
                i = j + 2; // the backslash and the byte it escapes
            }
            None => {
                return Err(ScanError {
                    at: line.len(),
                    expected: "the end of a string",
                });
            }
        }
    }
}

/// The end (exclusive) of the value starting at `start`.
fn value_end(line: &[u8], start: usize) -> Result<usize, ScanError> {
    match line.get(start) {
        Some(b'"') => string_end(line, start),
        Some(b'{' | b'[') => nested_end(line, start),
        Some(_) => {
            let mut i = start;
            while let Some(b) = line.get(i) {
                if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                    break;
                }
                i += 1;
            }
            Ok(i)
        }
        None => Err(ScanError {
            at: start,
            expected: "a value",
        }),
    }
}

/// The end of an object or array: brackets counted outside strings.
fn nested_end(line: &[u8], start: usize) -> Result<usize, ScanError> {
    let mut depth = 0usize;
    let mut i = start;
    while i < line.len() {
        match line[i] {
            b'"' => {
                i = string_end(line, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(ScanError {
        at: line.len(),
        expected: "the end of an object or array",
    })
}

/// The value of member `key`, if present.
pub(super) fn get<'a>(members: &[Member<'a>], key: &str) -> Option<&'a [u8]> {
    members
        .iter()
        .find(|(k, _)| *k == key.as_bytes())
        .map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(line: &str) -> Vec<(String, String)> {
        members(line.as_bytes())
            .expect("scan")
            .into_iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn top_level_members_and_only_those() {
        let got = keys(
            r#" { "a" : "x\"}{" , "b":{"verb":"get","c":[1,{"d":"]"}]},"n": -1.5e3,"t":true ,"z":null}  "#,
        );
        assert_eq!(
            got,
            [
                ("a", r#""x\"}{""#),
                ("b", r#"{"verb":"get","c":[1,{"d":"]"}]}"#),
                ("n", "-1.5e3"),
                ("t", "true"),
                ("z", "null"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert_eq!(keys("{}"), []);
    }

    #[test]
    fn broken_lines_are_errors_not_panics() {
        for bad in [
            "",
            "[1]",
            "{",
            r#"{"a""#,
            r#"{"a":"#,
            r#"{"a":"x"#,
            r#"{"a":{"b":1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":1}x"#,
            r#"{"a\"#,
            r#"{"a":"\"#,
            r#"{"a":[}"#,
        ] {
            assert!(members(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn agrees_with_serde_json_on_generated_lines() {
        let log = crate::testgen::audit_log(3);
        for line in log.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            let obj = v.as_object().expect("object");
            let m = members(line.as_bytes()).expect("scan");
            assert_eq!(m.len(), obj.len());
            for (k, raw) in m {
                let k = std::str::from_utf8(k).expect("utf-8");
                let parsed: serde_json::Value = serde_json::from_slice(raw).expect("value");
                assert_eq!(Some(&parsed), obj.get(k), "{k}");
            }
        }
    }
}
