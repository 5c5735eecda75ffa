//! The SSRF guard of fetches to addresses users or administrators give (storage nodes'
//! external downloads, the master's WOPI discovery): which addresses a fetch may reach, a DNS
//! resolver that drops the others, and the URL check applied to the first URL and to every
//! redirect, and one bounded GET through a guarded client. The clients themselves live with their
//! users.
//!
//! Names are checked *after* resolution and the connection goes to the checked address, so a name
//! that answers a public address to a first lookup and a private one to a second (DNS rebinding)
//! gains nothing. IP literals never reach a resolver, which is why URLs are checked as well.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect::{Attempt, Policy};

/// Most redirects one fetch follows (as many as reqwest's default policy).
pub const MAX_REDIRECTS: usize = 10;

/// IPv4 networks that are not the public internet: this host, private networks, shared carrier
/// space, loopback, link-local (cloud metadata at 169.254.169.254), protocol assignments,
/// documentation, the deprecated 6to4 relay, benchmarking, multicast and the reserved block
/// (which holds the broadcast address).
const REFUSED_V4: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8),
    (Ipv4Addr::new(10, 0, 0, 0), 8),
    (Ipv4Addr::new(100, 64, 0, 0), 10),
    (Ipv4Addr::new(127, 0, 0, 0), 8),
    (Ipv4Addr::new(169, 254, 0, 0), 16),
    (Ipv4Addr::new(172, 16, 0, 0), 12),
    (Ipv4Addr::new(192, 0, 0, 0), 24),
    (Ipv4Addr::new(192, 0, 2, 0), 24),
    (Ipv4Addr::new(192, 88, 99, 0), 24),
    (Ipv4Addr::new(192, 168, 0, 0), 16),
    (Ipv4Addr::new(198, 18, 0, 0), 15),
    (Ipv4Addr::new(198, 51, 100, 0), 24),
    (Ipv4Addr::new(203, 0, 113, 0), 24),
    (Ipv4Addr::new(224, 0, 0, 0), 4),
    (Ipv4Addr::new(240, 0, 0, 0), 4),
];

/// Only 2000::/3 is allocated as global unicast; everything outside it (loopback, unspecified,
/// the deprecated IPv4-compatible ::/96, unique-local, link-local, site-local, multicast) is
/// refused unless it embeds a permitted IPv4 address (see [`embedded_v4`]).
const GLOBAL_UNICAST_V6: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);

/// Parts of 2000::/3 that are not ordinary internet hosts: Teredo tunnels (their server and
/// client addresses are obfuscated IPv4), benchmarking, ORCHID, and the two documentation ranges.
const REFUSED_V6: &[(Ipv6Addr, u8)] = &[
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32),
    (Ipv6Addr::new(0x2001, 0x2, 0, 0, 0, 0, 0, 0), 48),
    (Ipv6Addr::new(0x2001, 0x10, 0, 0, 0, 0, 0, 0), 28),
    (Ipv6Addr::new(0x2001, 0x20, 0, 0, 0, 0, 0, 0), 28),
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32),
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20),
];

/// Which addresses external downloads may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressGuard {
    /// Lets every address through (config `fetch_allow_private_addresses`, closed networks only).
    pub allow_private: bool,
}

/// Why the guard refused a URL or a name. The messages never repeat the URL, which may carry
/// credentials; the master shows them to the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("only http and https URLs can be fetched")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    #[error("the address is not allowed: private, loopback, link-local and reserved addresses cannot be fetched")]
    Address,
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
}

impl AddressGuard {
    /// Whether a connection to `ip` may be made.
    pub fn permits(&self, ip: IpAddr) -> bool {
        if self.allow_private {
            return true;
        }
        match ip {
            IpAddr::V4(v4) => public_v4(v4),
            IpAddr::V6(v6) => match embedded_v4(v6) {
                Some(v4) => public_v4(v4),
                None => public_v6(v6),
            },
        }
    }

    /// Checks a URL about to be requested (the first one or a redirect's target): http or https,
    /// with a host, and a permitted address when the host is an IP literal. Names are checked
    /// by [`GuardedResolver`] once resolved.
    pub fn check_url(&self, url: &Url) -> Result<(), Refusal> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::Scheme);
        }
        let host = url.host_str().filter(|host| !host.is_empty()).ok_or(Refusal::NoHost)?;
        // The URL parser already normalised other IPv4 spellings (`0x7f.1`, `2130706433`) to
        // dotted decimal; v6 literals keep their brackets.
        let literal = host.strip_prefix('[').and_then(|inner| inner.strip_suffix(']')).unwrap_or(host);
        match literal.parse::<IpAddr>() {
            Ok(ip) if !self.permits(ip) => Err(Refusal::Address),
            _ => Ok(()),
        }
    }

    /// A redirect policy that checks every hop like the first URL and stops after
    /// [`MAX_REDIRECTS`].
    pub fn redirect_policy(self) -> Policy {
        Policy::custom(move |attempt: Attempt| {
            // `previous` starts with the first URL, which was not a redirect.
            if attempt.previous().len() > MAX_REDIRECTS {
                return attempt.error(Refusal::TooManyRedirects);
            }
            match self.check_url(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(refusal) => attempt.error(refusal),
            }
        })
    }

    /// The resolver for a reqwest client that must obey this guard.
    pub fn resolver(self) -> GuardedResolver {
        GuardedResolver { guard: self }
    }
}

fn in_v4(ip: Ipv4Addr, (network, prefix): (Ipv4Addr, u8)) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(network) & mask
}

fn in_v6(ip: Ipv6Addr, (network, prefix): (Ipv6Addr, u8)) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(network) & mask
}

fn public_v4(ip: Ipv4Addr) -> bool {
    !REFUSED_V4.iter().any(|&range| in_v4(ip, range))
}

fn public_v6(ip: Ipv6Addr) -> bool {
    in_v6(ip, GLOBAL_UNICAST_V6) && !REFUSED_V6.iter().any(|&range| in_v6(ip, range))
}

/// The IPv4 address a v6 address leads to when the network translates it: IPv4-mapped
/// (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d and the local-use 64:ff9b:1::/48) and 6to4
/// (2002:aabb:ccdd::). A mapped loopback must be refused like the loopback itself.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    const NAT64: (Ipv6Addr, u8) = (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96);
    const NAT64_LOCAL: (Ipv6Addr, u8) = (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48);
    const SIX_TO_FOUR: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16);
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return Some(mapped);
    }
    let bits = u128::from(ip);
    if in_v6(ip, NAT64) || in_v6(ip, NAT64_LOCAL) {
        // The last 32 bits (the truncation is the point).
        return Some(Ipv4Addr::from(bits as u32));
    }
    if in_v6(ip, SIX_TO_FOUR) {
        return Some(Ipv4Addr::from((bits >> 80) as u32));
    }
    None
}

/// Resolves names with the system resolver and keeps only the addresses the guard permits, so
/// the client connects to nothing else.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    guard: AddressGuard,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard;
        Box::pin(async move {
            // Port 0: reqwest puts the URL's port in afterwards.
            let resolved = tokio::net::lookup_host((name.as_str(), 0)).await?;
            let permitted: Vec<SocketAddr> = resolved.filter(|addr| guard.permits(addr.ip())).collect();
            if permitted.is_empty() {
                return Err(Box::new(Refusal::Address) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(permitted.into_iter()) as Addrs)
        })
    }
}

/// GETs `url` with `client` (one that obeys an [`AddressGuard`]) and reads at most `max` bytes of
/// a successful answer. Failures are sentences naming the URL; a refusal of the guard, which
/// travels as a source of the client's error, is spelled out.
pub async fn get_bounded(client: &reqwest::Client, url: Url, max: usize) -> Result<Vec<u8>, String> {
    let shown = url.to_string();
    let mut response = client.get(url).send().await.map_err(|e| {
        let mut why = format!("{shown} could not be fetched: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            why = format!("{why}: {cause}");
            source = cause.source();
        }
        why
    })?;
    if !response.status().is_success() {
        return Err(format!("{shown} answered {}", response.status()));
    }
    if response.content_length().is_some_and(|len| len > max as u64) {
        return Err(format!("{shown} answered more than {max} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{shown} could not be read: {e}"))? {
        body.extend_from_slice(&chunk);
        if body.len() > max {
            return Err(format!("{shown} answered more than {max} bytes"));
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    const STRICT: AddressGuard = AddressGuard { allow_private: false };
    const OPEN: AddressGuard = AddressGuard { allow_private: true };

    fn ip(text: &str) -> IpAddr {
        IpAddr::from_str(text).unwrap()
    }

    fn assert_refused(addresses: &[&str]) {
        for address in addresses {
            assert!(!STRICT.permits(ip(address)), "{address} permitted");
            assert!(OPEN.permits(ip(address)), "{address} refused with allow_private");
        }
    }

    #[test]
    fn public_addresses_are_permitted() {
        for address in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "172.15.255.255",
            "172.32.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700::1111",
            "2a00:1450:4001:82b::200e",
            "::ffff:93.184.216.34",
            "64:ff9b::808:808",
            "2002:5db8:d822::1",
        ] {
            assert!(STRICT.permits(ip(address)), "{address} refused");
        }
    }

    #[test]
    fn loopback_unspecified_and_this_network_are_refused() {
        assert_refused(&["127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3", "::1", "::"]);
    }

    #[test]
    fn private_networks_are_refused() {
        assert_refused(&[
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.0.1",
            "192.168.255.255",
        ]);
    }

    #[test]
    fn link_local_and_the_cloud_metadata_address_are_refused() {
        assert_refused(&["169.254.169.254", "169.254.0.1", "fe80::1", "febf::1"]);
    }

    #[test]
    fn carrier_grade_nat_benchmarking_and_protocol_assignments_are_refused() {
        assert_refused(&["100.64.0.1", "100.127.255.255", "198.18.0.1", "198.19.255.255", "192.0.0.8", "192.88.99.1"]);
    }

    #[test]
    fn documentation_ranges_are_refused() {
        assert_refused(&["192.0.2.1", "198.51.100.7", "203.0.113.200", "2001:db8::1", "3fff::1"]);
    }

    #[test]
    fn multicast_broadcast_and_reserved_are_refused() {
        assert_refused(&["224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255", "ff02::1", "ff0e::1"]);
    }

    #[test]
    fn unique_local_site_local_teredo_and_other_non_global_v6_are_refused() {
        assert_refused(&["fc00::1", "fd12:3456::1", "fec0::1", "2001::1", "2001:2::1", "100::1", "4000::1"]);
    }

    #[test]
    fn v6_addresses_embedding_a_refused_v4_address_are_refused() {
        assert_refused(&[
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::8.8.8.8",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::c0a8:1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
        ]);
    }

    #[test]
    fn allow_private_permits_every_address() {
        for address in ["127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "fd00::1", "::ffff:192.168.1.1"] {
            assert!(OPEN.permits(ip(address)), "{address}");
        }
    }

    #[test]
    fn urls_need_http_or_https_and_a_permitted_literal() {
        let check = |url: &str| STRICT.check_url(&Url::parse(url).unwrap());
        assert_eq!(check("https://example.com/file.bin"), Ok(()));
        assert_eq!(check("http://93.184.216.34:8080/x"), Ok(()));
        assert_eq!(check("http://[2606:4700::1111]/x"), Ok(()));
        assert_eq!(check("ftp://example.com/x"), Err(Refusal::Scheme));
        assert_eq!(check("file:///etc/passwd"), Err(Refusal::Scheme));
        assert_eq!(check("http://127.0.0.1/"), Err(Refusal::Address));
        assert_eq!(check("http://169.254.169.254/latest/meta-data/"), Err(Refusal::Address));
        assert_eq!(check("http://[::1]:8080/"), Err(Refusal::Address));
        assert_eq!(check("http://[::ffff:7f00:1]/"), Err(Refusal::Address));
        // Alternative spellings of 127.0.0.1 that the URL parser normalises.
        assert_eq!(check("http://2130706433/"), Err(Refusal::Address));
        assert_eq!(check("http://0x7f.1/"), Err(Refusal::Address));
        assert_eq!(check("http://0177.0.0.1/"), Err(Refusal::Address));
        assert_eq!(OPEN.check_url(&Url::parse("http://127.0.0.1:8080/").unwrap()), Ok(()));
        assert_eq!(OPEN.check_url(&Url::parse("gopher://127.0.0.1/").unwrap()), Err(Refusal::Scheme));
    }

    /// The guard's refusal among an error's causes.
    fn refusal(error: &reqwest::Error) -> Option<Refusal> {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(current) = cause {
            if let Some(refusal) = current.downcast_ref::<Refusal>() {
                return Some(refusal.clone());
            }
            cause = current.source();
        }
        None
    }

    #[tokio::test]
    async fn the_redirect_policy_checks_every_hop_and_follows_at_most_ten() {
        use axum::extract::Path;
        use axum::http::{StatusCode, header::LOCATION};
        use axum::routing::get;

        let redirect = |to: String| (StatusCode::FOUND, [(LOCATION, to)]);
        let app = axum::Router::new()
            .route("/to-metadata", get(move || async move { redirect("http://169.254.169.254/latest/".into()) }))
            .route("/to-file", get(move || async move { redirect("file:///etc/passwd".into()) }))
            .route(
                "/hops/{left}",
                get(move |Path(left): Path<u32>| async move {
                    if left == 0 { Err(StatusCode::NO_CONTENT) } else { Ok(redirect(format!("/hops/{}", left - 1))) }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::builder().redirect(STRICT.redirect_policy()).build().unwrap();
        let get = |path: &str| client.get(format!("{base}{path}")).send();

        assert_eq!(refusal(&get("/to-metadata").await.unwrap_err()), Some(Refusal::Address));
        // reqwest never follows other schemes: the fetch sees the 302 itself (an `http_status` failure).
        assert_eq!(get("/to-file").await.unwrap().status(), StatusCode::FOUND);
        // Same-host hops to 127.0.0.1 pass only with private addresses allowed; the limit stays.
        let open = reqwest::Client::builder().redirect(OPEN.redirect_policy()).build().unwrap();
        let hops = |left: u32| open.get(format!("{base}/hops/{left}")).send();
        assert_eq!(hops(10).await.unwrap().status(), StatusCode::NO_CONTENT);
        assert_eq!(refusal(&hops(11).await.unwrap_err()), Some(Refusal::TooManyRedirects));
    }

    #[tokio::test]
    async fn the_resolver_drops_refused_addresses_and_fails_when_none_remain() {
        let refused = STRICT.resolver().resolve(Name::from_str("localhost").unwrap()).await;
        let message = refused.err().map(|error| error.to_string()).unwrap_or_default();
        assert!(message.contains("not allowed"), "{message:?}");
        let resolved: Vec<SocketAddr> =
            OPEN.resolver().resolve(Name::from_str("localhost").unwrap()).await.unwrap().collect();
        assert!(!resolved.is_empty() && resolved.iter().all(|addr| addr.ip().is_loopback()), "{resolved:?}");
    }
}
