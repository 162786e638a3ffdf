//! Cursor pagination, newest first (CONTRACT §8): `?cursor=&limit=`. A cursor is the opaque
//! position of the last row shown (`<tag>:<row id>`, base64url), so rows added while a
//! client pages are never skipped or repeated; each list has its own tag.

use base64::Engine;

use crate::error::{FieldErrors, Result};

pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 100;

/// The cursor after the row `id` of a list tagged `tag`.
pub fn cursor(tag: &str, id: i64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{tag}:{id}"))
}

pub(crate) fn parse_cursor(text: &str, tag: &str) -> Option<i64> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
    let id: i64 = std::str::from_utf8(&bytes).ok()?.strip_prefix(tag)?.strip_prefix(':')?.parse().ok()?;
    (id > 0).then_some(id)
}

/// `cursor` and `limit`, each at most once: (rows before this id, page size). Anything else
/// is a 422 at `query.<name>`.
pub fn page_query(query: &str, tag: &str) -> Result<(Option<i64>, usize)> {
    let mut errors = FieldErrors::new();
    let (mut before, mut limit, mut seen) = (None, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if seen.contains(&key) {
            errors.add(format!("query.{key}"), "Give this parameter once.");
            continue;
        }
        seen.push(key);
        match key {
            "cursor" if value.is_empty() => {}
            "cursor" => match parse_cursor(value, tag) {
                Some(id) => before = Some(id),
                None => errors.add("query.cursor", "The cursor must be a next_cursor this API returned."),
            },
            "limit" => match value.parse::<usize>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => limit = Some(n),
                _ => errors.add("query.limit", format!("The limit must be a whole number from 1 to {MAX_LIMIT}.")),
            },
            _ => errors.add(format!("query.{key}"), "Unknown parameter; use cursor and limit."),
        }
    }
    errors.into_result()?;
    Ok((before, limit.unwrap_or(DEFAULT_LIMIT)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_strangers_are_refused() {
        assert_eq!(parse_cursor(&cursor("o", 42), "o"), Some(42));
        assert_eq!(parse_cursor(&cursor("d", 42), "o"), None, "another list's cursor");
        assert_eq!(page_query("", "o").unwrap(), (None, DEFAULT_LIMIT));
        assert_eq!(page_query(&format!("limit=5&cursor={}", cursor("o", 9)), "o").unwrap(), (Some(9), 5));
        for bad in ["limit=0", "limit=101", "limit=x", "cursor=abc", "limit=1&limit=2", "page=2", "cursor=bzow"] {
            assert!(page_query(bad, "o").is_err(), "{bad}");
        }
    }
}
