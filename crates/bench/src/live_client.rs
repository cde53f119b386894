//! The subscribers of the live scenario, as a process of their own (`apijet-bench
//! --live-client`): one HTTP/1.1 connection per subscription, as a browser's `EventSource`
//! holds it, each `POST /subscribe` with the nested Moment/User/Comment request for one
//! moment. A process holds at most as many connections as its file descriptors allow, so the
//! scenario starts several for the larger levels.
//!
//! Protocol with the scenario: the process prints `ready N` once every subscription has its
//! first answer (or `failed: …`), then records, for each later answer, the tick the writer
//! wrote into the moment's `content` (`live T`) and when it arrived (Unix ms). When its stdin
//! closes it writes `T MS` lines, one per answer, to the output file and exits.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The options of the live scenario, and of the subscriber processes it starts.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LiveArgs {
    /// Live scenario: subscriber levels (default 1000,10000,20000; --quick 100).
    #[arg(long, value_delimiter = ',')]
    pub live_levels: Option<Vec<u64>>,
    /// Live scenario: seconds of writes per level (default 10; --quick 3).
    #[arg(long)]
    pub live_seconds: Option<u64>,
    /// Internal: run the live scenario's subscribers against this apijet (HOST:PORT).
    #[arg(long, hide = true, requires_all = ["live_first", "live_count", "live_out"])]
    pub live_client: Option<String>,
    /// Internal: the first moment id of --live-client.
    #[arg(long, hide = true)]
    pub live_first: Option<i64>,
    /// Internal: how many subscribers --live-client holds.
    #[arg(long, hide = true)]
    pub live_count: Option<usize>,
    /// Internal: where --live-client writes the answers it saw.
    #[arg(long, hide = true)]
    pub live_out: Option<String>,
}

impl LiveArgs {
    /// Runs the subscribers when this process is one of the scenario's subscriber processes.
    pub async fn client(&self) -> Option<Result<(), String>> {
        let (Some(addr), Some(first), Some(count), Some(out)) = (
            &self.live_client,
            self.live_first,
            self.live_count,
            &self.live_out,
        ) else {
            return None;
        };
        Some(match addr.parse() {
            Ok(addr) => run(addr, first, count, out).await,
            Err(e) => Err(format!("--live-client {addr}: {e}")),
        })
    }
}

/// What the content of a moment says after the writer's tick `T`: `live T`.
pub const TICK_PREFIX: &str = "live ";

/// The request one subscriber follows.
pub fn request(moment: i64) -> String {
    format!(
        "{{\"Moment\":{{\"id\":{moment},\"@column\":\"id,userId,date,content\"}},\
         \"User\":{{\"id@\":\"Moment/userId\",\"@column\":\"id,name\"}},\
         \"Comment[]\":{{\"count\":5,\"Comment\":{{\"momentId@\":\"Moment/id\",\"@column\":\"id,userId,content\"}}}}}}"
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Answers seen: `(tick, arrival ms)`.
type Seen = Arc<Mutex<Vec<(u32, u64)>>>;

/// Runs the subscribers for moments `first..first + count` against `addr`.
pub async fn run(addr: SocketAddr, first: i64, count: usize, out: &str) -> Result<(), String> {
    let seen: Seen = Arc::new(Mutex::new(Vec::with_capacity(count * 16)));
    let ready = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(Mutex::new(None::<String>));
    // Connections are opened a few hundred at a time: each first answer is a read.
    let opening = Arc::new(tokio::sync::Semaphore::new(256));
    for i in 0..count {
        let (seen, ready, failed, opening) = (
            Arc::clone(&seen),
            Arc::clone(&ready),
            Arc::clone(&failed),
            Arc::clone(&opening),
        );
        let moment = first + i as i64;
        tokio::spawn(async move {
            if let Err(e) = subscribe(addr, moment, &seen, &ready, &opening).await {
                let mut f = failed.lock().unwrap_or_else(|e| e.into_inner());
                f.get_or_insert(format!("moment {moment}: {e}"));
            }
        });
    }
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Some(e) = failed.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            println!("failed: {e}");
            return Err(e);
        }
        if ready.load(Ordering::Relaxed) >= count {
            break;
        }
    }
    println!("ready {count}");
    let _ = std::io::stdout().flush();
    // Until the scenario closes stdin.
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut line = String::new();
    while stdin.read_line(&mut line).await.map_or(0, |n| n) > 0 {
        line.clear();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    let mut text = String::with_capacity(seen.len() * 20);
    for (tick, ms) in seen {
        text.push_str(&format!("{tick} {ms}\n"));
    }
    std::fs::write(out, text).map_err(|e| format!("cannot write {out}: {e}"))?;
    if let Some(e) = failed.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        return Err(e);
    }
    Ok(())
}

/// One subscription: the request, the response head, then the chunked event stream.
async fn subscribe(
    addr: SocketAddr,
    moment: i64,
    seen: &Seen,
    ready: &AtomicUsize,
    opening: &tokio::sync::Semaphore,
) -> Result<(), String> {
    let permit = opening.acquire().await.map_err(|e| e.to_string())?;
    let mut tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let body = request(moment);
    let head = format!(
        "POST /subscribe HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    tcp.write_all(body.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    // The response head.
    let body_start = loop {
        let n = tcp.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before the response head".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..body_start]).to_ascii_lowercase();
    if !head.contains("text/event-stream") {
        let rest = String::from_utf8_lossy(&buf[body_start..]).to_string();
        return Err(format!("not an event stream: {head} {rest}"));
    }
    let chunked = head.contains("transfer-encoding: chunked");
    buf.drain(..body_start);
    let mut events: Vec<u8> = Vec::with_capacity(8192);
    let mut first = Some(permit);
    loop {
        // Move whole chunks' payloads from `buf` to `events`.
        if chunked {
            while let Some(line_end) = find(&buf, b"\r\n") {
                let size = std::str::from_utf8(&buf[..line_end])
                    .ok()
                    .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
                    .ok_or("a bad chunk size")?;
                if buf.len() < line_end + 2 + size + 2 {
                    break;
                }
                if size == 0 {
                    return Err("the stream ended".into());
                }
                events.extend_from_slice(&buf[line_end + 2..line_end + 2 + size]);
                buf.drain(..line_end + 2 + size + 2);
            }
        } else {
            events.append(&mut buf);
        }
        while let Some(end) = find(&events, b"\n\n") {
            let event = &events[..end];
            if let Some(data) = find(event, b"data: ") {
                let arrived = now_ms();
                if first.take().is_some() {
                    ready.fetch_add(1, Ordering::Relaxed);
                } else if let Some(tick) = tick_of(&event[data..]) {
                    seen.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((tick, arrived));
                }
            }
            events.drain(..end + 2);
        }
        let n = tcp.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the server closed the stream".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The tick in `"content":"live T"`, without parsing the JSON.
fn tick_of(data: &[u8]) -> Option<u32> {
    let marker = format!("\"content\":\"{TICK_PREFIX}");
    let at = find(data, marker.as_bytes())? + marker.len();
    let digits: Vec<u8> = data[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .copied()
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_tick_is_read_from_the_content() {
        let data = br#"data: {"Moment":{"id":1,"content":"live 42"},"ok":true}"#;
        assert_eq!(super::tick_of(data), Some(42));
        assert_eq!(super::tick_of(br#"{"content":"hello"}"#), None);
    }
}
