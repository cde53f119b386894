//! Who a client is, once for every limiter: the address a connection or a trusted proxy names,
//! as one [`ClientKey`].
//!
//! A connection's client is its peer, unless the peer is a trusted proxy (`trusted_proxies`):
//! then the address the proxy gives is believed, from its PROXY protocol header (haproxy
//! `send-proxy` / `send-proxy-v2`, read by the accept loop) or from the request's `Forwarded`
//! / `X-Forwarded-For` header (haproxy `option forwardfor`). Walking those headers from the
//! nearest hop outwards, hops that are trusted proxies themselves are skipped, and the first
//! address that is not one is the client's: what a client writes into the header beyond that
//! is never read, so no client can name another. Nothing else's headers are believed.
//!
//! The key counts IPv4 addresses as they are and IPv6 ones by their /64 network, which one
//! machine usually holds whole: the failed-login limits, the ledger of work under way and the
//! live answers' per-visitor limit all count by it.

use axum::http::HeaderMap;
use std::net::{IpAddr, Ipv6Addr};

/// The key a client is counted under; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    /// The key of a client at `addr`: IPv4 as it is (also when mapped into IPv6), IPv6 by its
    /// /64 network.
    pub fn of(addr: IpAddr) -> ClientKey {
        ClientKey(match addr {
            IpAddr::V4(_) => addr,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
            },
        })
    }

    /// The key as an address (the /64 network's first address for IPv6).
    pub fn ip(self) -> IpAddr {
        self.0
    }

    /// The key as a number: IPv4 as mapped into IPv6 (whose last 64 bits are never zero,
    /// unlike an IPv6 key's), IPv6 as its /64.
    pub fn id(self) -> u128 {
        match self.0 {
            IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
            IpAddr::V6(v6) => u128::from(v6),
        }
    }
}

impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// An address range: an address and how many of its leading bits are fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    net: u128,
    mask: u128,
    v6: bool,
}

impl Cidr {
    fn parse(text: &str) -> Option<Cidr> {
        let (addr, bits) = match text.split_once('/') {
            Some((a, b)) => (a, Some(b.parse::<u32>().ok()?)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .ok()?;
        let (value, width, v6) = match addr {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32, false),
            IpAddr::V6(v6) => (u128::from(v6), 128, true),
        };
        let bits = bits.unwrap_or(width);
        if bits > width {
            return None;
        }
        // The mask within the address's own width.
        let mask = match bits {
            0 => 0,
            b => (u128::MAX << (128 - b)) >> (128 - width),
        };
        Some(Cidr {
            net: value & mask,
            mask,
            v6,
        })
    }

    fn contains(&self, addr: IpAddr) -> bool {
        let (value, v6) = match addr {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), false),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => (u128::from(u32::from(v4)), false),
                None => (u128::from(v6), true),
            },
        };
        v6 == self.v6 && value & self.mask == self.net
    }
}

/// The proxies whose word about a client's address is believed (`trusted_proxies`).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<Cidr>);

impl TrustedProxies {
    /// Parses addresses and CIDR ranges (`10.0.0.0/8`, `::1`, `[fd00::]/8`), or says which
    /// one is not one.
    pub fn parse(list: &[String]) -> Result<TrustedProxies, String> {
        list.iter()
            .map(|item| item.trim())
            .filter(|item| !item.is_empty())
            .map(|item| {
                Cidr::parse(item).ok_or_else(|| {
                    format!(
                        "trusted_proxies: '{item}' is not an address or an address range \
                         (10.0.0.5, 10.0.0.0/8, ::1, fd00::/8)"
                    )
                })
            })
            .collect::<Result<Vec<Cidr>, String>>()
            .map(TrustedProxies)
    }

    /// Whether `addr` is a trusted proxy.
    pub fn trusts(&self, addr: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(addr))
    }

    /// The address of the client of a request from `peer` (the connection's peer, or what its
    /// PROXY header said) with `headers`: see the module documentation.
    pub fn client_address(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let forwarded = headers.get_all("forwarded");
        let hops: Vec<Option<IpAddr>> = if forwarded.iter().next().is_some() {
            forwarded
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(forwarded_for)
                .collect()
        } else {
            headers
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(|hop| hop_address(hop.trim()))
                .collect()
        };
        let mut client = peer;
        for hop in hops.into_iter().rev() {
            match hop {
                // An unknown or hidden hop: the last one known speaks for it.
                None => break,
                Some(addr) => {
                    client = addr;
                    if !self.trusts(addr) {
                        break;
                    }
                }
            }
        }
        client
    }
}

/// The `for=` address of one element of a `Forwarded` header (RFC 7239).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element
        .split(';')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("for"))
        .and_then(|(_, v)| hop_address(v.trim().trim_matches('"')))
}

/// An address as a hop writes it: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
/// `[2001:db8::1]:4711`.
fn hop_address(text: &str) -> Option<IpAddr> {
    if let Ok(addr) = text.parse::<IpAddr>() {
        return Some(addr);
    }
    if let Some(rest) = text.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    let (host, port) = text.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("header"));
        }
        h
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let one = ClientKey::of(ip("2001:db8:1:2:aaaa::1"));
        assert_eq!(one, ClientKey::of(ip("2001:db8:1:2:bbbb::9")));
        assert_ne!(one, ClientKey::of(ip("2001:db8:1:3::1")));
        assert_eq!(
            ClientKey::of(ip("::ffff:10.0.0.1")),
            ClientKey::of(ip("10.0.0.1"))
        );
        assert_eq!(one.to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn ranges_hold_their_addresses_and_no_others() {
        let t = TrustedProxies::parse(&["10.0.0.0/8".into(), "::1".into(), "fd00::/8".into()])
            .expect("parse");
        assert!(t.trusts(ip("10.1.2.3")));
        assert!(t.trusts(ip("::ffff:10.1.2.3")));
        assert!(!t.trusts(ip("11.0.0.1")));
        assert!(t.trusts(ip("::1")));
        assert!(!t.trusts(ip("::2")));
        assert!(t.trusts(ip("fd12::1")));
        assert!(!t.trusts(ip("fe80::1")));
        let all = TrustedProxies::parse(&["0.0.0.0/0".into()]).expect("parse");
        assert!(all.trusts(ip("203.0.113.9")) && !all.trusts(ip("::1")));
        for bad in ["10.0.0.0/33", "proxy.local", "10.0.0.1/x", "::1/129"] {
            let e = TrustedProxies::parse(&[bad.into()]).expect_err(bad);
            assert!(e.contains("trusted_proxies") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn only_a_trusted_peer_is_believed_and_only_about_its_own_hop() {
        let t = TrustedProxies::parse(&["10.0.0.1".into(), "10.0.0.2".into()]).expect("parse");
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.7")]);
        assert_eq!(t.client_address(ip("198.51.100.1"), &h), ip("198.51.100.1"));
        // The client wrote 1.1.1.1 itself; the proxy appended what it saw.
        assert_eq!(t.client_address(ip("10.0.0.1"), &h), ip("203.0.113.7"));
        // Through two trusted proxies.
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.7, 10.0.0.2")]);
        assert_eq!(t.client_address(ip("10.0.0.1"), &h), ip("203.0.113.7"));
        // Headers on several lines, and ports.
        let h = headers(&[
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "203.0.113.7:5000"),
        ]);
        assert_eq!(t.client_address(ip("10.0.0.1"), &h), ip("203.0.113.7"));
        // No header: the proxy itself.
        assert_eq!(
            t.client_address(ip("10.0.0.1"), &HeaderMap::new()),
            ip("10.0.0.1")
        );
        // Garbage from the proxy stops the walk at the last known hop.
        let h = headers(&[("x-forwarded-for", "203.0.113.7, unknown")]);
        assert_eq!(t.client_address(ip("10.0.0.1"), &h), ip("10.0.0.1"));
    }

    /// Random forwarding chains through trusted and untrusted hops: the client is always the
    /// nearest hop that is no trusted proxy, and a peer that is not trusted is believed about
    /// nothing; random IPv6 addresses share a key exactly when they share their /64.
    #[test]
    fn random_chains_name_the_nearest_untrusted_hop_and_keys_follow_the_64() {
        let mut rng = apijet_testkit::rng::Rng::new(25);
        let t = TrustedProxies::parse(&["10.0.0.0/8".into(), "fd00::/8".into()]).expect("parse");
        let hop = |rng: &mut apijet_testkit::rng::Rng| -> IpAddr {
            let n = rng.next_u64();
            match rng.below(4) {
                0 => IpAddr::from([10, (n >> 8) as u8, (n >> 16) as u8, n as u8]),
                1 => IpAddr::from(Ipv6Addr::from((0xfd00u128 << 112) | u128::from(n))),
                2 => IpAddr::from([203, 0, (n >> 8) as u8, n as u8]),
                _ => IpAddr::from(Ipv6Addr::from((0x2001_0db8u128 << 96) | u128::from(n))),
            }
        };
        for _ in 0..2000 {
            let chain: Vec<IpAddr> = (0..rng.below(5)).map(|_| hop(&mut rng)).collect();
            let peer = hop(&mut rng);
            let text: Vec<String> = chain.iter().map(IpAddr::to_string).collect();
            let h = headers(&[("x-forwarded-for", &text.join(", "))]);
            let expected = if !t.trusts(peer) {
                peer
            } else {
                chain
                    .iter()
                    .rev()
                    .find(|a| !t.trusts(**a))
                    .or(chain.first())
                    .copied()
                    .unwrap_or(peer)
            };
            assert_eq!(t.client_address(peer, &h), expected, "{text:?} via {peer}");
            let (a, b) = (rng.next_u64(), rng.next_u64());
            let net = u128::from(rng.next_u64()) << 64;
            let same = |low: u64| IpAddr::from(Ipv6Addr::from(net | u128::from(low)));
            assert_eq!(ClientKey::of(same(a)), ClientKey::of(same(b)));
            let other = IpAddr::from(Ipv6Addr::from((net ^ (1u128 << 64)) | u128::from(a)));
            assert_ne!(ClientKey::of(same(a)), ClientKey::of(other));
            assert_ne!(
                ClientKey::of(same(a)).id(),
                ClientKey::of(IpAddr::from([1, 2, 3, 4])).id()
            );
        }
    }

    #[test]
    fn forwarded_is_read_before_x_forwarded_for() {
        let t = TrustedProxies::parse(&["10.0.0.1".into()]).expect("parse");
        let h = headers(&[
            (
                "forwarded",
                "for=1.1.1.1;proto=http, for=\"[2001:db8:cafe::17]:4711\";by=10.0.0.1",
            ),
            ("x-forwarded-for", "198.51.100.9"),
        ]);
        assert_eq!(
            t.client_address(ip("10.0.0.1"), &h),
            ip("2001:db8:cafe::17")
        );
        let h = headers(&[("forwarded", "For=203.0.113.4")]);
        assert_eq!(t.client_address(ip("10.0.0.1"), &h), ip("203.0.113.4"));
    }
}
