//! A Server-Sent Events client for `/subscribe`: the events of one stream, read by a thread of
//! their own and taken one at a time with a timeout.

use super::Client;
use serde_json::Value;
use std::io::BufRead;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
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

/// An open event stream; it ends when the server closes it (or is dropped with the server).
pub struct Events {
    rx: Receiver<Option<Event>>,
    ended: bool,
}

/// The JSON answer of a subscription that did not start, or a transport failure.
#[derive(Debug)]
pub enum NotStarted {
    Answer(Value),
    Failed(String),
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
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(10)))
                .proxy(None)
                .build(),
        );
        let url = format!("{}{path}", client.base());
        let mut headers: Vec<(String, String)> = client.auth_headers();
        headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let res = match body {
            Some(b) => {
                let mut req = agent.post(&url).header("Content-Type", "application/json");
                for (k, v) in &headers {
                    req = req.header(k, v);
                }
                req.send(b)
            }
            None => {
                let mut req = agent.get(&url);
                for (k, v) in &headers {
                    req = req.header(k, v);
                }
                req.call()
            }
        }
        .map_err(|e| NotStarted::Failed(format!("{path}: {e}")))?;
        let kind = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if !kind.starts_with("text/event-stream") {
            let text = res
                .into_body()
                .read_to_string()
                .map_err(|e| NotStarted::Failed(e.to_string()))?;
            return Err(match serde_json::from_str(&text) {
                Ok(v) => NotStarted::Answer(v),
                Err(_) => NotStarted::Failed(format!("{kind}: {text}")),
            });
        }
        let (tx, rx) = channel();
        let reader = std::io::BufReader::new(res.into_body().into_reader());
        std::thread::spawn(move || {
            let (mut id, mut kind, mut data) = (None, None::<String>, String::new());
            for line in reader.lines() {
                let Ok(line) = line else { break };
                if line.is_empty() {
                    if !data.is_empty() {
                        let event = Event {
                            id: id.take(),
                            kind: kind.take().unwrap_or_else(|| "message".into()),
                            data: std::mem::take(&mut data),
                            at: Instant::now(),
                        };
                        if tx.send(Some(event)).is_err() {
                            return;
                        }
                    }
                    continue;
                }
                if line.starts_with(':') {
                    let comment = Event {
                        id: None,
                        kind: ":".into(),
                        data: line,
                        at: Instant::now(),
                    };
                    if tx.send(Some(comment)).is_err() {
                        return;
                    }
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("event: ") {
                    kind = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            let _ = tx.send(None);
        });
        Ok(Events { rx, ended: false })
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
