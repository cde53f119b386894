//! A Server-Sent Events client for `/subscribe`: the events of one stream, read on a thread of
//! its own (the test kit's HTTP connection, whose body arrives piece by piece) and taken one at
//! a time with a timeout.

use super::Client;
use apijet_testkit::http::Connection;
use serde_json::Value;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// One event, or one comment line (`kind` `":"`, a heartbeat).
#[derive(Clone, Debug)]
pub struct Event {
    pub id: Option<String>,
    /// `message` unless the event names its type (`patch`, `expired`, `end`).
    pub kind: String,
    pub data: String,
    /// When the event arrived.
    pub at: Instant,
}

impl Event {
    /// The data as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {}", self.data))
    }
}

/// An open event stream; it ends when the server closes it. Dropping it closes the
/// connection.
pub struct Events {
    rx: Receiver<Option<Event>>,
    ended: bool,
    /// Dropped with the stream: the reading thread then closes the connection.
    _close: tokio::sync::oneshot::Sender<()>,
}

/// The JSON answer of a subscription that did not start, or a transport failure.
#[derive(Debug)]
pub enum NotStarted {
    Answer(Value),
    Failed(String),
}

/// What the reading thread says first: the stream started, or why not.
enum Start {
    Stream,
    Not(NotStarted),
}

/// Splits the body of an event stream into events as it arrives.
struct Parser {
    buf: String,
    events: Sender<Option<Event>>,
}

impl Parser {
    fn feed(&mut self, bytes: &[u8]) {
        self.buf.push_str(&String::from_utf8_lossy(bytes));
        while let Some(end) = self.buf.find("\n\n") {
            let block: String = self.buf.drain(..end + 2).collect();
            let (mut id, mut kind, mut data) = (None, None::<String>, String::new());
            for line in block.lines() {
                if line.starts_with(':') {
                    let _ = self.events.send(Some(Event {
                        id: None,
                        kind: ":".into(),
                        data: line.to_string(),
                        at: Instant::now(),
                    }));
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("event: ") {
                    kind = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            if !data.is_empty() {
                let _ = self.events.send(Some(Event {
                    id,
                    kind: kind.unwrap_or_else(|| "message".into()),
                    data,
                    at: Instant::now(),
                }));
            }
        }
    }
}

impl Events {
    /// `POST path` with `body` (a subscription), or `GET path` when `body` is `None`, with the
    /// login of `client` and `extra` headers.
    pub fn open(
        client: &Client,
        path: &str,
        body: Option<&str>,
        extra: &[(&str, &str)],
    ) -> Result<Events, NotStarted> {
        let mut headers: Vec<(String, String)> = client.auth_headers();
        headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let (addr, path) = (client.addr(), path.to_string());
        let (method, body) = match body {
            Some(b) => ("POST", b.as_bytes().to_vec()),
            None => ("GET", Vec::new()),
        };
        let (tx, rx) = channel();
        let (start_tx, start_rx) = channel::<Start>();
        let (close, closed) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = start_tx.send(Start::Not(NotStarted::Failed(e.to_string())));
                    return;
                }
            };
            let mut conn = Connection::new(addr);
            let mut parser = Parser {
                buf: String::new(),
                events: tx.clone(),
            };
            let mut first: Option<Vec<u8>> = None;
            let mut started = false;
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let mut on_data = |b: &[u8]| {
                if started {
                    parser.feed(b);
                    return;
                }
                let seen = first.get_or_insert_with(Vec::new);
                seen.extend_from_slice(b);
                // An event stream starts with a field or a comment; a refusal is JSON.
                if seen.first().is_some_and(|c| *c != b'{') {
                    started = true;
                    let _ = start_tx.send(Start::Stream);
                    let bytes = std::mem::take(seen);
                    parser.feed(&bytes);
                }
            };
            let read = conn.request(method, &path, &headers, &body, &mut on_data);
            let result = runtime.block_on(async {
                tokio::select! {
                    r = read => Some(r),
                    _ = closed => None,
                }
            });
            let Some(result) = result else {
                // The stream was dropped: the connection closes with the request.
                return;
            };
            if !started {
                let text = String::from_utf8_lossy(&first.unwrap_or_default()).into_owned();
                let not = match (&result, serde_json::from_str(&text)) {
                    (Ok(_), Ok(v)) => NotStarted::Answer(v),
                    (Err(e), _) => NotStarted::Failed(e.to_string()),
                    (Ok(h), Err(_)) => NotStarted::Failed(format!("HTTP {}: {text}", h.status)),
                };
                let _ = start_tx.send(Start::Not(not));
            }
            let _ = tx.send(None);
        });
        match start_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Start::Stream) => Ok(Events {
                rx,
                ended: false,
                _close: close,
            }),
            Ok(Start::Not(not)) => Err(not),
            Err(_) => Err(NotStarted::Failed(
                "no answer to the subscription within 60 s".into(),
            )),
        }
    }

    /// Like [`Events::open`], panicking when the subscription does not start.
    pub fn start(client: &Client, path: &str, body: Option<&str>) -> Events {
        Events::open(client, path, body, &[])
            .unwrap_or_else(|e| panic!("subscribing to {path} {body:?}: {e:?}"))
    }

    /// The next event (comments skipped) within `within`; `None` when none came or the stream
    /// ended.
    pub fn next(&mut self, within: Duration) -> Option<Event> {
        self.next_any(within, false)
    }

    /// The next event or comment within `within`.
    pub fn next_any(&mut self, within: Duration, comments: bool) -> Option<Event> {
        let deadline = Instant::now() + within;
        while !self.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Some(e)) if e.kind == ":" && !comments => continue,
                Ok(Some(e)) => return Some(e),
                Ok(None) | Err(RecvTimeoutError::Disconnected) => self.ended = true,
                Err(RecvTimeoutError::Timeout) => return None,
            }
        }
        None
    }

    /// Whether the server closed the stream (after waiting up to `within` for it).
    pub fn ended(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while !self.ended && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Some(_)) => continue,
                Ok(None) | Err(RecvTimeoutError::Disconnected) => self.ended = true,
                Err(RecvTimeoutError::Timeout) => break,
            }
        }
        self.ended
    }
}
