//! Shared decoding for the text encodings (JSON Lines and YAML).
//!
//! The fast path decodes straight from text. Only when that fails is the input decoded again
//! through `serde_path_to_error` to learn the field path, so a valid trace pays nothing for
//! good error messages.

use serde::de::DeserializeOwned;

use crate::error::Problem;
use crate::model::{FORMAT_NAME, FORMAT_VERSION, Header};
use crate::serde_impl::PartialEvent;

/// A decode failure: field path inside the value, the problem, and the column if known.
pub(crate) struct TextError {
    pub(crate) path: String,
    pub(crate) problem: Problem,
    pub(crate) column: Option<usize>,
}

fn json_problem(e: &serde_json::Error) -> Problem {
    let msg = e.to_string();
    let msg = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg,
    };
    match e.classify() {
        serde_json::error::Category::Data => Problem::Schema(msg),
        _ => Problem::Syntax(msg),
    }
}

fn join_path(prefix: &str, inner: &str) -> String {
    if inner.is_empty() || inner == "." || inner == "?" {
        prefix.to_owned()
    } else if inner.starts_with('[') {
        format!("{prefix}{inner}")
    } else {
        format!("{prefix}.{inner}")
    }
}

/// Decodes one JSON text, reporting the field path (under `prefix`) on failure.
pub(crate) fn from_json_slice<T: DeserializeOwned>(s: &[u8], prefix: &str) -> Result<T, TextError> {
    match serde_json::from_slice::<T>(s) {
        Ok(v) => Ok(v),
        Err(first) => {
            let mut de = serde_json::Deserializer::from_slice(s);
            let (path, e) = match serde_path_to_error::deserialize::<_, T>(&mut de) {
                Err(e) => (e.path().to_string(), e.into_inner()),
                // Cannot happen (same input, same type), but never panic on it.
                Ok(_) => (String::new(), first),
            };
            Err(TextError {
                path: join_path(prefix, &path),
                problem: json_problem(&e),
                column: Some(e.column()),
            })
        }
    }
}

/// Decodes an already-parsed value, reporting the field path (under `prefix`) on failure.
pub(crate) fn from_value<T: DeserializeOwned>(
    v: serde_json::Value,
    prefix: &str,
) -> Result<T, TextError> {
    serde_path_to_error::deserialize::<_, T>(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        TextError {
            path: join_path(prefix, &path),
            problem: json_problem(&inner),
            column: None,
        }
    })
}

/// Decodes one event given as JSON text.
pub(crate) fn event_from_json(s: &[u8], index: u64) -> Result<PartialEvent, TextError> {
    from_json_slice(s, &format!("events[{index}]"))
}

/// Decodes a header given as JSON text. A good header is deserialized straight into the
/// model (a header declaring a million volumes is ~40 MB of JSON; going through a
/// `serde_json::Value` tree first took ~20× that in memory); one that fails, or whose format
/// or version is wrong, goes through [`header_from_value`] for the located message.
pub(crate) fn header_from_json(s: &[u8]) -> Result<Header, TextError> {
    if let Ok(h) = serde_json::from_slice::<Header>(s)
        && h.format == FORMAT_NAME
        && (1..=FORMAT_VERSION).contains(&h.version)
    {
        return Ok(h);
    }
    let value: serde_json::Value = from_json_slice(s, "header")?;
    header_from_value(value)
}

/// Decodes a header value, checking the format name and version first so that a file that
/// is not a trace at all gets that message instead of a list of missing fields.
pub(crate) fn header_from_value(v: serde_json::Value) -> Result<Header, TextError> {
    let err = |path: &str, problem| TextError {
        path: path.to_owned(),
        problem,
        column: None,
    };
    let Some(obj) = v.as_object() else {
        return Err(err(
            "header",
            Problem::NotATrace("the header is not a map".into()),
        ));
    };
    match obj.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT_NAME) => {}
        Some(other) => {
            return Err(err(
                "header.format",
                Problem::NotATrace(format!("format is {other:?}, expected {FORMAT_NAME:?}")),
            ));
        }
        None => {
            return Err(err(
                "header.format",
                Problem::NotATrace(format!("the header has no `format: {FORMAT_NAME}` field")),
            ));
        }
    }
    if let Some(found) = obj.get("version").and_then(serde_json::Value::as_u64) {
        if found == 0 {
            return Err(err(
                "header.version",
                Problem::InvalidValue("version 0 does not exist; the first version is 1".into()),
            ));
        }
        if found > u64::from(FORMAT_VERSION) {
            return Err(err(
                "header.version",
                Problem::UnsupportedVersion {
                    found: u32::try_from(found).unwrap_or(u32::MAX),
                    supported: FORMAT_VERSION,
                },
            ));
        }
    }
    from_value(v, "header")
}
