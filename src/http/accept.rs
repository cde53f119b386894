//! The accept loop: a cap on open connections, header and idle timeouts per connection, and a
//! graceful stop when the stop future resolves (see [`super::drain`]: while the server drains,
//! every HTTP/1 answer closes its connection).
//!
//! hyper's own header timeout also runs while a keep-alive connection waits for its next
//! request, so one setting would serve both; here each connection has a small clock instead.
//! The connection's reads and its requests move it between three phases, and a watchdog beside
//! the connection closes it when its phase has lasted too long:
//! - idle (no request under way, nothing received since the last answer): `idle_timeout_ms`;
//! - head (bytes received, no complete request head yet): `header_timeout_ms`, so a client that
//!   trickles a header a byte at a time is cut off;
//! - busy (a request is being answered): no limit here; the body has `body_timeout_ms` (in the
//!   edge middleware) and statements have `statement_timeout_ms`.
//!
//! Each request runs with its client's key ([`client`]): its peer's address, or what a trusted
//! proxy says about it (`crate::client`), from the PROXY header that starts the connection or
//! from the request's forwarding headers.

use super::drain::Drain;
use super::proxy_protocol::Start;
use crate::client::{ClientKey, TrustedProxies};
use crate::metrics::Metrics;
use axum::body::Body;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Connection limits, and whose word about a client's address is believed.
#[derive(Debug, Clone)]
pub struct Limits {
    /// From a request's first byte to its complete head.
    pub header: Duration,
    /// A keep-alive connection with nothing under way.
    pub idle: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Requests carry a probe of their client's socket (see [`client_probe`]): their
    /// statements run on the connection's own thread (SQLite), where nothing else can notice
    /// that the client left.
    pub probe_clients: bool,
    /// The proxies whose PROXY headers and forwarding headers are believed.
    pub trusted_proxies: Arc<TrustedProxies>,
}

/// The client whose request is being answered (none outside a request): the holder of the
/// request's watch, which the accept loop sets to the client's key. A task-local of its own
/// was a second scope around every request, swapped in and out on each of its polls.
pub fn client() -> Option<ClientKey> {
    let id = apijet_exec::cancel::current().holder()?;
    // The key's number is its address as IPv6 (IPv4 mapped into it), from which `of` gives
    // the key back.
    Some(ClientKey::of(IpAddr::V6(Ipv6Addr::from(id))))
}

/// Most 503 answers being written at once to connections over the cap.
const REFUSALS_IN_FLIGHT: usize = 256;

/// How long requests in flight get to finish after a stop signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

const IDLE: u8 = 0;
const HEAD: u8 = 1;
const BUSY: u8 = 2;

/// One connection's phase and when it began, shared by its socket, its requests and its
/// watchdog.
struct Clock {
    epoch: Instant,
    phase: AtomicU8,
    since_ms: AtomicU64,
    busy: AtomicU32,
    /// Wakes the watchdog when the phase changes.
    changed: tokio::sync::Notify,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            epoch: Instant::now(),
            phase: AtomicU8::new(IDLE),
            since_ms: AtomicU64::new(0),
            busy: AtomicU32::new(0),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn received(&self) {
        if self
            .phase
            .compare_exchange(IDLE, HEAD, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.since_ms.store(self.now_ms(), Ordering::Release);
            self.changed.notify_one();
        }
    }

    fn request_started(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.phase.store(BUSY, Ordering::Release);
        self.changed.notify_one();
    }

    /// Bytes of a request arrived and no request was handed to the service yet: what is
    /// written now is hyper's own answer to a request it could not parse.
    fn parsing(&self) -> bool {
        self.phase.load(Ordering::Acquire) == HEAD
    }

    fn request_done(&self) {
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.since_ms.store(self.now_ms(), Ordering::Release);
            self.phase.store(IDLE, Ordering::Release);
            self.changed.notify_one();
        }
    }

    /// Resolves when the connection has stayed too long in its phase.
    async fn expired(&self, limits: Limits) {
        loop {
            let limit = match self.phase.load(Ordering::Acquire) {
                IDLE => limits.idle,
                HEAD => limits.header,
                _ => {
                    self.changed.notified().await;
                    continue;
                }
            };
            let since = Duration::from_millis(self.since_ms.load(Ordering::Acquire));
            let deadline = self.epoch + since + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = self.changed.notified() => {}
            }
        }
    }
}

/// The socket, telling the clock when bytes arrive. hyper answers a request it cannot parse
/// (a URL past 65,534 bytes, a head past its buffer, broken HTTP) by itself, with a bare
/// status; that answer is replaced here by an APIJSON envelope with the same status.
struct Watched {
    tcp: TcpStream,
    /// Bytes read before HTTP began (looking for a PROXY header), handed to it first.
    prefix: Vec<u8>,
    clock: Arc<Clock>,
    /// The envelope written instead of hyper's answer, and how much of it is written.
    replacement: Option<(Vec<u8>, usize)>,
}

impl Watched {
    /// Writes the replacement of hyper's answer once `hyper_bytes` (the start of what hyper
    /// writes) turn out to be one; `None` when they are not.
    fn poll_replace(
        &mut self,
        cx: &mut Context<'_>,
        hyper_bytes: &[u8],
    ) -> Option<Poll<io::Result<()>>> {
        if self.replacement.is_none() {
            if !self.clock.parsing() {
                return None;
            }
            let status = hyper_refusal(hyper_bytes)?;
            self.replacement = Some((parse_refusal(status), 0));
        }
        let (bytes, written) = self.replacement.as_mut()?;
        while *written < bytes.len() {
            match Pin::new(&mut self.tcp).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => {
                    return Some(Poll::Ready(Err(io::ErrorKind::WriteZero.into())))
                }
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => return Some(Poll::Ready(Err(e))),
                Poll::Pending => return Some(Poll::Pending),
            }
        }
        Some(Poll::Ready(Ok(())))
    }
}

/// The status of an answer hyper writes by itself for a request it could not parse: a bare
/// status line of 400, 414 or 431 with an empty body.
fn hyper_refusal(bytes: &[u8]) -> Option<u16> {
    let rest = bytes.strip_prefix(b"HTTP/1.1 ")?;
    let status = std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()?;
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let empty = bytes[..head_end]
        .split(|&b| b == b'\n')
        .any(|line| line.eq_ignore_ascii_case(b"content-length: 0\r"));
    (matches!(status, 400 | 414 | 431) && empty).then_some(status)
}

/// The whole HTTP answer to a request hyper could not parse, an envelope naming why.
fn parse_refusal(status: u16) -> Vec<u8> {
    let (reason, msg) = match status {
        414 => (
            "URI Too Long",
            "the request URL is longer than 65534 bytes, the most an HTTP/1.1 request line may \
             have here (a fixed limit): send the request as a POST body (max_body_bytes)",
        ),
        431 => (
            "Request Header Fields Too Large",
            "the request line and headers are larger than the server reads (about 400 KB, a \
             fixed limit): send the request as a POST body (max_body_bytes)",
        ),
        _ => ("Bad Request", "the request is not valid HTTP/1.1"),
    };
    let body = super::reply::envelope_bytes(status, msg);
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.drain(..n);
            self.clock.received();
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.received();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.poll_replace(cx, buf) {
            // hyper's own bytes are taken as written: the replacement went out instead.
            Some(done) => done.map_ok(|()| buf.len()),
            None => Pin::new(&mut self.tcp).poll_write(cx, buf),
        }
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        match self.poll_replace(cx, first) {
            Some(done) => done.map_ok(|()| bufs.iter().map(|b| b.len()).sum()),
            None => Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// A response body that tells the clock when the answer is over (sent or abandoned).
struct Tracked {
    body: Body,
    clock: Arc<Clock>,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.clock.request_done();
    }
}

/// What the accept loop serves: the routes with their layers, answering every request.
pub trait App<B>:
    tower::Service<
        axum::extract::Request,
        Response = axum::http::Response<B>,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<A, B> App<B> for A where
    A: tower::Service<
            axum::extract::Request,
            Response = axum::http::Response<B>,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// The body of an answer, as hyper sends it.
pub trait AnswerBody:
    http_body::Body<Data = axum::body::Bytes, Error: Into<axum::BoxError>> + Send + 'static
{
}

impl<B> AnswerBody for B where
    B: http_body::Body<Data = axum::body::Bytes, Error: Into<axum::BoxError>> + Send + 'static
{
}

/// Serves `app` on `listener` until `stop` resolves, then lets requests in flight finish.
pub async fn run<A, B>(
    listener: TcpListener,
    app: A,
    limits: Limits,
    metrics: Arc<Metrics>,
    drain: Arc<Drain>,
    stop: impl Future<Output = ()>,
) where
    A: App<B>,
    B: AnswerBody,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let refusing = Arc::new(Semaphore::new(REFUSALS_IN_FLIGHT));
    let graceful = GracefulShutdown::new();
    let builder = Arc::new(auto::Builder::new(TokioExecutor::new()));
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        // Small answers go out at once: without TCP_NODELAY, Nagle's algorithm meets the
        // client's delayed ACK and holds the last segment of a body for tens of milliseconds.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            metrics.connection_refused();
            // Answering takes up to ~1 s per connection; under a flood, refusals beyond a
            // few hundred at once are plain closes, so they cannot hold sockets themselves.
            if let Ok(answering) = Arc::clone(&refusing).try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(tcp).await;
                    drop(answering);
                });
            }
            continue;
        };
        let connection = Connection {
            tcp,
            peer: peer.ip(),
            limits: limits.clone(),
            metrics: Arc::clone(&metrics),
            drain: Arc::clone(&drain),
        };
        let (app, builder) = (app.clone(), Arc::clone(&builder));
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            connection.serve(app, &builder, watcher).await;
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!("stopping: waiting for requests in flight");
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "requests still running after {}s; stopping anyway",
            SHUTDOWN_GRACE.as_secs()
        );
    }
}

/// An accepted connection, before it is served.
struct Connection {
    tcp: TcpStream,
    peer: IpAddr,
    limits: Limits,
    metrics: Arc<Metrics>,
    drain: Arc<Drain>,
}

impl Connection {
    /// Serves the connection's requests until it ends, times out or the server stops.
    async fn serve<A, B>(
        mut self,
        app: A,
        builder: &auto::Builder<TokioExecutor>,
        graceful: hyper_util::server::graceful::Watcher,
    ) where
        A: App<B>,
        B: AnswerBody,
    {
        let limits = self.limits.clone();
        // A trusted proxy may start with a PROXY header naming the client.
        let (address, prefix) = if limits.trusted_proxies.trusts(self.peer) {
            match super::proxy_protocol::read_start(&mut self.tcp, limits.header).await {
                Ok(Start::Plain(bytes)) => (self.peer, bytes),
                Ok(Start::Proxied(client, rest)) => (client.unwrap_or(self.peer), rest),
                Err(e) => {
                    tracing::debug!("connection from a trusted proxy closed: {e}");
                    return;
                }
            }
        } else {
            (self.peer, Vec::new())
        };
        let clock = Arc::new(Clock::new());
        let probe = if limits.probe_clients {
            client_probe(&self.tcp)
        } else {
            None
        };
        let io = TokioIo::new(Watched {
            tcp: self.tcp,
            prefix,
            clock: Arc::clone(&clock),
            replacement: None,
        });
        let service_clock = Arc::clone(&clock);
        let trusted = Arc::clone(&limits.trusted_proxies);
        let drain = Arc::clone(&self.drain);
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                service_clock.request_started();
                let client = ClientKey::of(trusted.client_address(address, req.headers()));
                // A draining server sends keep-alive clients to a new connection, which the
                // balancer no longer brings here (HTTP/2 has no such header).
                let closing = drain.is_draining() && req.version() <= hyper::Version::HTTP_11;
                let clock = Arc::clone(&service_clock);
                let call = tower::ServiceExt::oneshot(app.clone(), req.map(Body::new));
                let mut watch = apijet_exec::cancel::Watch::default().for_client(client.id());
                if let Some(probe) = &probe {
                    watch = watch.with_client(Arc::clone(probe));
                }
                async move {
                    let mut response = match apijet_exec::cancel::watched(watch, call).await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    };
                    if closing {
                        response.headers_mut().insert(
                            hyper::header::CONNECTION,
                            hyper::header::HeaderValue::from_static("close"),
                        );
                    }
                    Ok::<_, std::convert::Infallible>(response.map(|body| {
                        Body::new(Tracked {
                            body: Body::new(body),
                            clock,
                        })
                    }))
                }
            });
        let conn = graceful.watch(
            builder
                .serve_connection_with_upgrades(io, service)
                .into_owned(),
        );
        let metrics = self.metrics;
        metrics.connection(1);
        tokio::select! {
            r = conn => {
                if let Err(e) = r {
                    tracing::debug!("connection ended: {e}");
                }
            }
            () = clock.expired(limits) => {
                metrics.timeout();
                tracing::debug!("connection closed: header or idle timeout");
            }
        }
        metrics.connection(-1);
    }
}

/// A probe that tells whether the client of `tcp` has gone: a second handle on the socket,
/// peeked without blocking (end of stream or an error: gone; data or nothing yet: there).
#[cfg(unix)]
fn client_probe(tcp: &TcpStream) -> Option<apijet_exec::cancel::ClientProbe> {
    use std::os::fd::AsFd;
    let fd = tcp.as_fd().try_clone_to_owned().ok()?;
    let socket = std::net::TcpStream::from(fd);
    socket.set_nonblocking(true).ok()?;
    Some(Arc::new(move || {
        let mut byte = [0u8; 1];
        match socket.peek(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        }
    }))
}

#[cfg(not(unix))]
fn client_probe(_tcp: &TcpStream) -> Option<apijet_exec::cancel::ClientProbe> {
    None
}

/// One connection too many: a 503 envelope, then close. The request is read first (briefly),
/// so that closing does not reset the connection before the client has read the answer.
async fn refuse(mut tcp: TcpStream) {
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_millis(200), tcp.read(&mut buf)).await;
    let body = super::reply::envelope_bytes(503, "too many connections: max_connections are open");
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let write = async {
        tcp.write_all(head.as_bytes()).await?;
        tcp.write_all(&body).await?;
        tcp.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

#[cfg(test)]
mod tests {
    use super::client;
    use crate::client::ClientKey;
    use apijet_exec::cancel::{watched, Watch};

    #[tokio::test]
    async fn the_client_of_a_request_is_the_key_its_watch_holds() {
        assert_eq!(client(), None, "outside a request");
        for addr in [
            "127.0.0.1",
            "203.0.113.9",
            "::ffff:198.51.100.7",
            "2001:db8:1:2:3:4:5:6",
            "::1",
            "::",
        ] {
            let key = ClientKey::of(addr.parse().expect("an address"));
            let watch = Watch::default().for_client(key.id());
            assert_eq!(
                watched(watch, async { client() }).await,
                Some(key),
                "{addr}"
            );
        }
    }
}
