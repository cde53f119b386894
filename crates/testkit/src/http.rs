//! The one HTTP/1.1 client of the kit, on tokio: keep-alive, `Content-Length` and chunked
//! bodies, the body handed to a callback as it arrives (a 1,000,000-row list is counted, never
//! held), the time to the first and the last byte.
//!
//! The bench uses it directly for what a load generator cannot do (time one streamed request,
//! read the `x-apijet-statements` header, check answers, the built-in closed-loop runner); the
//! tests use it through the blocking [`crate::Client`], which adds cookies, a bearer token and
//! a timeout. It is not a general client: no TLS, no redirects, no proxies, no compression.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What came back, apart from the body (which went to the callback).
#[derive(Debug, Clone)]
pub struct Head {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    /// Body bytes received (after de-chunking).
    pub bytes: u64,
    /// Time from sending to the status line.
    pub first_byte: Duration,
    /// Time from sending to the last body byte.
    pub total: Duration,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One keep-alive connection to one server, reopened when the server closed it.
pub struct Connection {
    addr: SocketAddr,
    host: String,
    conn: Option<BufReader<TcpStream>>,
}

impl Connection {
    pub fn new(addr: SocketAddr) -> Connection {
        Connection {
            addr,
            host: addr.to_string(),
            conn: None,
        }
    }

    /// POSTs a JSON body and returns the head and the whole body.
    pub async fn post(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<(Head, Vec<u8>)> {
        let mut out = Vec::new();
        let head = self
            .request("POST", path, headers, body, &mut |b| {
                out.extend_from_slice(b)
            })
            .await?;
        Ok((head, out))
    }

    /// Sends one request; the body goes to `on_data` piece by piece. A reused connection the
    /// server has closed meanwhile is reopened once (nothing of the answer was seen yet).
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        on_data: &mut (dyn FnMut(&[u8]) + Send),
    ) -> io::Result<Head> {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req.push_str("Content-Type: application/json\r\n");
        }
        for (k, v) in headers {
            req.push_str(k);
            req.push_str(": ");
            req.push_str(v);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        let reused = self.conn.is_some();
        match self.exchange(req.as_bytes(), body, on_data).await {
            Err(Retry::Stale) if reused => {
                self.conn = None;
                match self.exchange(req.as_bytes(), body, on_data).await {
                    Ok(h) => Ok(h),
                    Err(Retry::Stale) => Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        "the server closed the connection before answering",
                    )),
                    Err(Retry::Io(e)) => Err(e),
                }
            }
            Ok(h) => Ok(h),
            Err(Retry::Stale) => Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "the server closed the connection before answering",
            )),
            Err(Retry::Io(e)) => Err(e),
        }
    }

    async fn exchange(
        &mut self,
        head: &[u8],
        body: &[u8],
        on_data: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<Head, Retry> {
        if self.conn.is_none() {
            let s = TcpStream::connect(self.addr).await.map_err(Retry::Io)?;
            s.set_nodelay(true).map_err(Retry::Io)?;
            self.conn = Some(BufReader::with_capacity(64 * 1024, s));
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(Retry::Io(io::Error::other("no connection")));
        };
        let start = Instant::now();
        let sent = async {
            let s = conn.get_mut();
            s.write_all(head).await?;
            s.write_all(body).await?;
            s.flush().await
        }
        .await;
        if sent.is_err() {
            self.conn = None;
            return Err(Retry::Stale);
        }
        let mut line = String::new();
        match conn.read_line(&mut line).await {
            Ok(0) | Err(_) => {
                self.conn = None;
                return Err(Retry::Stale);
            }
            Ok(_) => {}
        }
        let first_byte = start.elapsed();
        let result = read_rest(conn, &line, head.starts_with(b"HEAD "), on_data).await;
        match result {
            Ok((status, headers, bytes, keep)) => {
                if !keep {
                    self.conn = None;
                }
                Ok(Head {
                    status,
                    headers,
                    bytes,
                    first_byte,
                    total: start.elapsed(),
                })
            }
            Err(e) => {
                self.conn = None;
                Err(Retry::Io(e))
            }
        }
    }
}

enum Retry {
    /// Nothing came back on a connection: it may have been closed while idle.
    Stale,
    Io(io::Error),
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

type Parsed = (u16, Vec<(String, String)>, u64, bool);

/// Reads the headers after the status line, then the body; says whether the connection stays.
async fn read_rest(
    conn: &mut BufReader<TcpStream>,
    status_line: &str,
    head_request: bool,
    on_data: &mut (dyn FnMut(&[u8]) + Send),
) -> io::Result<Parsed> {
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or_default().to_string();
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if conn.read_line(&mut line).await? == 0 {
            return Err(bad("connection closed inside the headers"));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    let mut keep = version == "HTTP/1.1" && get("connection").as_deref() != Some("close");
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    if head_request || status == 204 || status == 304 {
        // No body, whatever the headers say.
    } else if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size_line = String::new();
            if conn.read_line(&mut size_line).await? == 0 {
                return Err(bad("connection closed inside a chunked body"));
            }
            let hex = size_line.trim().split(';').next().unwrap_or_default();
            let size = u64::from_str_radix(hex, 16)
                .map_err(|_| bad(format!("bad chunk size {size_line:?}")))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    let mut t = String::new();
                    if conn.read_line(&mut t).await? == 0 || t.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            read_exact_to(conn, size, &mut buf, on_data).await?;
            bytes += size;
            let mut crlf = [0u8; 2];
            conn.read_exact(&mut crlf).await?;
        }
    } else if let Some(len) = get("content-length") {
        let len: u64 = len
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        read_exact_to(conn, len, &mut buf, on_data).await?;
        bytes = len;
    } else {
        loop {
            let n = conn.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            on_data(&buf[..n]);
            bytes += n as u64;
        }
        keep = false;
    }
    Ok((status, headers, bytes, keep))
}

async fn read_exact_to(
    conn: &mut BufReader<TcpStream>,
    mut left: u64,
    buf: &mut [u8],
    on_data: &mut (dyn FnMut(&[u8]) + Send),
) -> io::Result<()> {
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = conn.read(&mut buf[..want]).await?;
        if n == 0 {
            return Err(bad("connection closed inside the body"));
        }
        on_data(&buf[..n]);
        left -= n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn chunked_and_length_bodies_over_one_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut buf = vec![0u8; 4096];
            let mut seen = 0;
            // Two requests on one connection; answer each once its blank line arrived.
            let mut got = Vec::new();
            while seen < 2 {
                let n = s.read(&mut buf).await.expect("read");
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                let count = text.matches("\r\n\r\n").count();
                while seen < count {
                    let answer: &[u8] = if seen == 0 {
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Apijet-Statements: 3\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{\"code\":200}"
                    };
                    s.write_all(answer).await.expect("write");
                    seen += 1;
                }
            }
        });
        let mut c = Connection::new(addr);
        let (h, body) = c.post("/get", &[], b"").await.expect("first");
        assert_eq!(h.status, 200);
        assert_eq!(body, b"hello world");
        assert_eq!(h.header("x-apijet-statements"), Some("3"));
        let (h, body) = c.post("/get", &[], b"").await.expect("second");
        assert_eq!(h.bytes, 12);
        assert_eq!(crate::body_code(&body), Some(200));
    }
}
