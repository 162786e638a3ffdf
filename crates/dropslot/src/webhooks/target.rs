//! Where a webhook may be sent (CONTRACT §5): http(s) only, and never to loopback, private,
//! link-local or other internal addresses unless the operator allows them. Checked when an
//! endpoint is saved, and again at every delivery against the address actually connected
//! to (the HTTP client resolves names only through [`GuardedResolver`]), so a name that
//! later resolves inward (DNS rebinding) is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use url::{Host, Url};

/// Longest accepted URL.
const MAX_URL: usize = 2000;
/// A name that takes longer than this to resolve is refused.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The URL's form: absolute http(s), a host, no credentials (they belong in `auth_header`).
pub fn parse(text: &str) -> Result<Url, String> {
    if text.len() > MAX_URL {
        return Err(format!("The url may be at most {MAX_URL} characters."));
    }
    let url = Url::parse(text).map_err(|e| format!("The url is not a valid absolute URL ({e})."))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("The url must start with http:// or https://.".into());
    }
    if url.host().is_none() {
        return Err("The url must name a host.".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("The url may not carry credentials; use auth_header.".into());
    }
    Ok(url)
}

/// True for addresses a webhook may not reach unless private targets are allowed.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => internal_v4(v4),
            None => internal_v6(v6),
        },
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

fn internal_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
        || ip.to_ipv4().is_some_and(internal_v4) // IPv4-compatible
        || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
}

/// Why `ip` is refused, in the integrator's words.
fn refusal(ip: IpAddr) -> String {
    format!(
        "The url resolves to {ip}, an internal address (loopback, private or link-local); webhooks must target a public address."
    )
}

/// Resolves the URL's host (or takes its address literal) and refuses internal addresses.
pub async fn check(url: &Url, allow_private: bool) -> Result<(), String> {
    let addrs = match url.host() {
        Some(Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
        Some(Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
        Some(Host::Domain(name)) => resolve(name).await?.into_iter().map(|a| a.ip()).collect(),
        None => return Err("The url must name a host.".into()),
    };
    if allow_private {
        return Ok(());
    }
    match addrs.into_iter().find(|ip| is_internal(*ip)) {
        Some(ip) => Err(refusal(ip)),
        None => Ok(()),
    }
}

/// The literal address of a URL's host, if it is one, refused when internal (the HTTP
/// client does not resolve literals, so the delivery checks them here).
pub fn check_literal(url: &Url, allow_private: bool) -> Result<(), String> {
    let ip = match url.host() {
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
        _ => return Ok(()),
    };
    if !allow_private && is_internal(ip) { Err(refusal(ip)) } else { Ok(()) }
}

async fn resolve(name: &str) -> Result<Vec<SocketAddr>, String> {
    let lookup = tokio::net::lookup_host((name, 0));
    match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
        Ok(Ok(addrs)) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            if addrs.is_empty() { Err(format!("The url's host {name} does not resolve.")) } else { Ok(addrs) }
        }
        Ok(Err(_)) => Err(format!("The url's host {name} does not resolve.")),
        Err(_) => Err(format!("The url's host {name} took too long to resolve.")),
    }
}

/// The delivery client's resolver: the system's, with internal addresses removed (unless
/// allowed). A name left with no address fails the attempt with the reason.
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let addrs = resolve(name.as_str()).await?;
            let refused = addrs.iter().find(|a| is_internal(a.ip())).map(|a| refusal(a.ip()));
            let kept: Vec<SocketAddr> = addrs.into_iter().filter(|a| allow_private || !is_internal(a.ip())).collect();
            if kept.is_empty() {
                return Err(refused.unwrap_or_else(|| format!("{} does not resolve", name.as_str())).into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:1.1.1.1"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn url_forms() {
        assert!(parse("https://example.com/hooks").is_ok());
        for bad in
            ["ftp://example.com", "example.com/hook", "http://user:pw@example.com", "https://", "file:///etc/passwd"]
        {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn literal_and_named_internal_targets_are_refused() {
        for url in ["http://127.0.0.1:9/x", "http://[::1]/", "http://169.254.169.254/latest", "http://localhost:1/"] {
            let u = parse(url).unwrap();
            assert!(check(&u, false).await.is_err(), "{url}");
            assert!(check(&u, true).await.is_ok(), "{url} with private targets allowed");
        }
    }
}
