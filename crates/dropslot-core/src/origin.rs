//! Web origins (RFC 6454) as a publishable key lists them and a browser sends them in
//! `Origin`: `scheme://host[:port]`, scheme `http` or `https`, lower case, the default port
//! left out, no path. A key's origins are stored in this form, and a request's `Origin` is
//! compared with them byte for byte after the same normalisation.

/// At most this many origins per key.
pub const MAX_ORIGINS: usize = 20;

/// The normalised form of `text`, or why it is not an origin.
pub fn normalise(text: &str) -> Result<String, &'static str> {
    const BAD: &str = "An origin is http(s)://host[:port], with no path, query or user (e.g. https://shop.example).";
    let text = text.trim();
    let text = text.strip_suffix('/').unwrap_or(text);
    let lower = text.to_ascii_lowercase();
    let (scheme, rest) = lower.split_once("://").ok_or(BAD)?;
    let default_port = match scheme {
        "https" => "443",
        "http" => "80",
        _ => return Err(BAD),
    };
    if rest.is_empty() || rest.len() > 253 + 6 {
        return Err(BAD);
    }
    let (host, port) = if rest.starts_with('[') {
        let (h, after) = rest.split_once(']').ok_or(BAD)?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(BAD)?),
        };
        (&rest[..=h.len()], port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        }
    };
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        !v6.is_empty() && v6.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
    } else {
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    };
    if !host_ok {
        return Err(BAD);
    }
    match port {
        None => Ok(format!("{scheme}://{host}")),
        Some(p) => {
            let n: u16 =
                p.parse().ok().filter(|_| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())).ok_or(BAD)?;
            if n == 0 {
                return Err(BAD);
            }
            let p = n.to_string();
            if p == default_port { Ok(format!("{scheme}://{host}")) } else { Ok(format!("{scheme}://{host}:{p}")) }
        }
    }
}

/// A key's origins: 1 to [`MAX_ORIGINS`], each normalised, duplicates dropped; or the index
/// and reason of the first bad one (`None` for the list itself).
pub fn normalise_all(texts: &[String]) -> Result<Vec<String>, (Option<usize>, &'static str)> {
    if texts.is_empty() || texts.len() > MAX_ORIGINS {
        return Err((None, "List 1 to 20 origins: the pages allowed to use the key (e.g. https://shop.example)."));
    }
    let mut out: Vec<String> = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let o = normalise(t).map_err(|m| (Some(i), m))?;
        if !out.contains(&o) {
            out.push(o);
        }
    }
    Ok(out)
}

/// Whether a request's `Origin` header is one of `allowed` (normalised origins). `null` and
/// anything that is not an origin never is.
pub fn allowed(header: &str, allowed: &[String]) -> bool {
    normalise(header).is_ok_and(|o| allowed.contains(&o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalised_or_refused() {
        for (given, want) in [
            ("https://Shop.Example", "https://shop.example"),
            ("https://shop.example/", "https://shop.example"),
            ("https://shop.example:443", "https://shop.example"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://localhost:80", "http://localhost"),
            ("http://[::1]:3000", "http://[::1]:3000"),
            ("http://[::1]", "http://[::1]"),
        ] {
            assert_eq!(normalise(given).as_deref(), Ok(want), "{given}");
        }
        for bad in [
            "",
            "null",
            "shop.example",
            "ftp://shop.example",
            "https://shop.example/path",
            "https://user@shop.example",
            "https://shop.example?q",
            "https://shop.example:0",
            "https://shop.example:99999",
            "https://-shop.example",
            "https://shop..example",
            "https://shop.example\nhttps://evil.example",
            "https://*.example",
            "http://::1",
            "http://[::1]x",
        ] {
            assert!(normalise(bad).is_err(), "{bad:?}");
        }
        assert!(allowed("https://shop.example", &["https://shop.example".into()]));
        assert!(!allowed("https://evil.example", &["https://shop.example".into()]));
        assert!(!allowed("null", &["https://shop.example".into()]));
        assert_eq!(normalise_all(&[]).unwrap_err().0, None);
        assert_eq!(normalise_all(&["https://a.example".into(), "x".into()]).unwrap_err().0, Some(1));
    }
}
