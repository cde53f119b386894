//! The PROXY protocol, versions 1 and 2 (haproxy `send-proxy` and `send-proxy-v2`): the line
//! or block a proxy writes before the client's bytes, naming the client's address.
//!
//! It is read only from trusted proxies (`trusted_proxies`), and only when the connection
//! starts with one: a trusted proxy that sends none (forwarding headers only) is served as it
//! is, its first bytes handed to HTTP unchanged.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const V1: &[u8] = b"PROXY ";
const V2: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 line, `\r\n` included.
const V1_MAX: usize = 107;
/// Version 2's fixed part: signature, version and command, family, length.
const V2_HEAD: usize = 16;

/// What the start of a connection from a trusted proxy says.
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    /// No PROXY header: these bytes are the client's and go to HTTP.
    Plain(Vec<u8>),
    /// A PROXY header naming the client (none: the proxy's own connection, a health check),
    /// and the bytes after it.
    Proxied(Option<IpAddr>, Vec<u8>),
}

/// Reads the start of a connection from a trusted proxy, within `within`.
pub async fn read_start(tcp: &mut TcpStream, within: Duration) -> io::Result<Start> {
    let mut buf = Vec::with_capacity(256);
    let read = async {
        loop {
            match parse(&buf) {
                Parsed::NeedMore => {}
                Parsed::Plain => return Ok(Start::Plain(std::mem::take(&mut buf))),
                Parsed::Proxied(client, used) => {
                    return Ok(Start::Proxied(client, buf.split_off(used)));
                }
                Parsed::Invalid(why) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, why));
                }
            }
            let mut chunk = [0u8; 256];
            let n = tcp.read(&mut chunk).await?;
            if n == 0 {
                return Ok(Start::Plain(std::mem::take(&mut buf)));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(within, read)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no request within the timeout"))?
}

#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    NeedMore,
    Plain,
    Proxied(Option<IpAddr>, usize),
    Invalid(&'static str),
}

fn parse(buf: &[u8]) -> Parsed {
    let prefix = |sig: &[u8]| buf.len() <= sig.len() && sig.starts_with(buf);
    if buf.is_empty() || prefix(V1) || prefix(V2) {
        return Parsed::NeedMore;
    }
    if buf.starts_with(V1) {
        return v1(buf);
    }
    if buf.starts_with(V2) {
        return v2(buf);
    }
    Parsed::Plain
}

fn v1(buf: &[u8]) -> Parsed {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() >= V1_MAX {
            Parsed::Invalid("a PROXY line longer than 107 bytes")
        } else {
            Parsed::NeedMore
        };
    };
    let Ok(line) = std::str::from_utf8(&buf[V1.len()..end]) else {
        return Parsed::Invalid("a PROXY line that is not text");
    };
    let fields: Vec<&str> = line.split(' ').collect();
    let client = match fields.as_slice() {
        ["UNKNOWN", ..] => None,
        ["TCP4", src, _dst, _sport, _dport] => match src.parse::<Ipv4Addr>() {
            Ok(a) => Some(IpAddr::V4(a)),
            Err(_) => return Parsed::Invalid("a PROXY TCP4 line without an IPv4 source"),
        },
        ["TCP6", src, _dst, _sport, _dport] => match src.parse::<Ipv6Addr>() {
            Ok(a) => Some(IpAddr::V6(a)),
            Err(_) => return Parsed::Invalid("a PROXY TCP6 line without an IPv6 source"),
        },
        _ => return Parsed::Invalid("a PROXY line of an unknown form"),
    };
    Parsed::Proxied(client, end + 2)
}

fn v2(buf: &[u8]) -> Parsed {
    if buf.len() < V2_HEAD {
        return Parsed::NeedMore;
    }
    let (version, command, family) = (buf[12] >> 4, buf[12] & 0x0f, buf[13]);
    if version != 2 {
        return Parsed::Invalid("a PROXY version 2 header of another version");
    }
    let len = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if buf.len() < V2_HEAD + len {
        return Parsed::NeedMore;
    }
    let body = &buf[V2_HEAD..V2_HEAD + len];
    let client = match (command, family >> 4) {
        // LOCAL: the proxy's own connection (a health check).
        (0, _) => None,
        (1, 1) if body.len() >= 12 => Some(IpAddr::V4(Ipv4Addr::new(
            body[0], body[1], body[2], body[3],
        ))),
        (1, 2) if body.len() >= 36 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&body[..16]);
            Some(IpAddr::V6(Ipv6Addr::from(octets)))
        }
        // UNSPEC or UNIX sockets: no address to speak of.
        (1, 0 | 3) => None,
        (1, _) => return Parsed::Invalid("a PROXY version 2 address shorter than its family"),
        _ => return Parsed::Invalid("a PROXY version 2 header with an unknown command"),
    };
    Parsed::Proxied(client, V2_HEAD + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_1_lines_name_the_client_and_leave_the_request() {
        let req = b"PROXY TCP4 203.0.113.7 10.0.0.1 5555 8080\r\nGET /health HTTP/1.1\r\n";
        let used = req.len() - b"GET /health HTTP/1.1\r\n".len();
        assert_eq!(
            parse(req),
            Parsed::Proxied(Some("203.0.113.7".parse().expect("ip")), used)
        );
        let v6 = b"PROXY TCP6 2001:db8::9 ::1 5555 8080\r\n";
        assert_eq!(
            parse(v6),
            Parsed::Proxied(Some("2001:db8::9".parse().expect("ip")), v6.len())
        );
        assert_eq!(parse(b"PROXY UNKNOWN\r\n"), Parsed::Proxied(None, 15));
        assert_eq!(parse(b"PROXY TCP4 203.0"), Parsed::NeedMore);
        assert_eq!(parse(b"PRO"), Parsed::NeedMore);
        assert!(matches!(
            parse(b"PROXY TCP4 x y 1 2\r\n"),
            Parsed::Invalid(_)
        ));
        assert!(matches!(parse(&[b'X'; 200][..]), Parsed::Plain));
        let long = [V1, &[b'1'; 120][..]].concat();
        assert!(matches!(parse(&long), Parsed::Invalid(_)));
    }

    #[test]
    fn version_2_blocks_name_the_client_and_leave_the_request() {
        let mut block = V2.to_vec();
        block.extend_from_slice(&[
            0x21, 0x11, 0, 12, 203, 0, 113, 7, 10, 0, 0, 1, 0x15, 0xb3, 0x1f, 0x90,
        ]);
        let used = block.len();
        block.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(
            parse(&block),
            Parsed::Proxied(Some("203.0.113.7".parse().expect("ip")), used)
        );
        assert_eq!(parse(&block[..20]), Parsed::NeedMore);
        let mut local = V2.to_vec();
        local.extend_from_slice(&[0x20, 0x00, 0, 0]);
        assert_eq!(parse(&local), Parsed::Proxied(None, 16));
    }

    #[test]
    fn plain_requests_are_not_taken_for_headers() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Parsed::Plain);
        assert_eq!(parse(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Parsed::Plain);
        assert_eq!(parse(b"POST /get HTTP/1.1"), Parsed::Plain);
    }
}
