//! The apijet servers under test: the same binary (`apijet serve`) started as a child process
//! with a TOML written for the scenario, on a free port, killed when dropped; plus the RSS
//! readings of that process from `/proc`.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Settings of one server instance (the rest are apijet's defaults).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub max_count: u64,
    pub write_queue: bool,
    /// `max_rows` and `max_answer_bytes` when not the defaults (the operator's cap on one
    /// answer).
    pub answer_cap: Option<(u64, u64)>,
}

impl ServerConfig {
    /// The TOML file of these settings.
    pub fn toml(&self) -> String {
        format!(
            "# written by apijet bench\n\
             max_count = {}\n\
             max_page = 1000000\n\
             max_objects = 32\n\
             max_body_bytes = 8388608\n\
             max_batch = 1000\n\
             statement_timeout_ms = 0\n\
             anonymous_statement_timeout_ms = 0\n\
             anonymous_reads_per_address = 0\n\
             token_secret = \"apijet-bench-secret\"\n\
             write_queue = {}\n{}",
            self.max_count.max(100),
            self.write_queue,
            self.answer_cap
                .map_or(String::new(), |(rows, bytes)| format!(
                    "max_rows = {rows}\nmax_answer_bytes = {bytes}\n"
                ))
        )
    }
}

/// A running `apijet serve`.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    pub pid: u32,
    log: PathBuf,
}

impl Server {
    /// Starts `apijet serve` on `db_url` and waits until it accepts connections.
    pub fn start(
        apijet: &Path,
        db_url: &str,
        cfg: &ServerConfig,
        work: &Path,
    ) -> Result<Server, String> {
        Server::start_toml(apijet, db_url, &cfg.toml(), work)
    }

    /// Starts `apijet serve` on `db_url` with the settings `toml`.
    pub fn start_toml(
        apijet: &Path,
        db_url: &str,
        toml: &str,
        work: &Path,
    ) -> Result<Server, String> {
        std::fs::create_dir_all(work)
            .map_err(|e| format!("cannot create {}: {e}", work.display()))?;
        let config = work.join("apijet.toml");
        std::fs::write(&config, toml)
            .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        Server::spawn(apijet, work, "apijet serve", |cmd, addr| {
            cmd.arg("serve")
                .arg("--db")
                .arg(db_url)
                .arg("--listen")
                .arg(addr.to_string())
                .arg("--config")
                .arg(&config);
        })
    }

    /// Starts the hand-written endpoint ([`crate::handwritten`]) for `lookup` on `db_url`, a
    /// process of its own started from the same binary, and waits until it accepts connections.
    pub fn start_handwritten(
        apijet: &Path,
        db_url: &str,
        lookup: &crate::handwritten::Lookup,
        work: &Path,
    ) -> Result<Server, String> {
        std::fs::create_dir_all(work)
            .map_err(|e| format!("cannot create {}: {e}", work.display()))?;
        Server::spawn(apijet, work, "the hand-written endpoint", |cmd, addr| {
            cmd.arg("bench")
                .arg("--serve-handwritten")
                .arg(lookup.spec())
                .arg("--handwritten-db")
                .arg(db_url)
                .arg("--handwritten-listen")
                .arg(addr.to_string());
        })
    }

    /// Starts `apijet` with the arguments `args` adds (given the address to listen on), its
    /// output in `work/apijet.log`, and waits until it accepts connections.
    fn spawn(
        apijet: &Path,
        work: &Path,
        what: &str,
        args: impl FnOnce(&mut Command, SocketAddr),
    ) -> Result<Server, String> {
        let log = work.join("apijet.log");
        let log_file = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| format!("cannot reopen {}: {e}", log.display()))?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("cannot find a free port: {e}"))?
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut cmd = Command::new(apijet);
        args(&mut cmd, addr);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", apijet.display()))?;
        let pid = child.id();
        let mut server = Server {
            child,
            addr,
            pid,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "{what} exited early ({status}):\n{}",
                    server.log_tail(3000)
                ));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(server);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{what} did not listen on {addr} within 120 s:\n{}",
                    server.log_tail(3000)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The end of the server's log.
    pub fn log_tail(&self, max: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(max);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        text[start..].to_string()
    }

    /// Resets the kernel's peak-RSS counter (`VmHWM`) so that it covers what follows.
    pub fn reset_peak(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5");
    }

    /// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
    pub fn status_kib(&self, field: &str) -> Option<u64> {
        status_kib(self.pid, field)
    }

    /// Samples `VmRSS` every 10 ms until the returned sampler is stopped.
    pub fn sample_rss(&self) -> RssSampler {
        RssSampler::start(self.pid)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// A background reader of a process's RSS, keeping the largest value seen.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peak));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(kib) = status_kib(pid, "VmRSS") {
                    p.fetch_max(kib, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        RssSampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the peak in KiB.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_own_rss() {
        let kib = super::status_kib(std::process::id(), "VmRSS");
        if cfg!(target_os = "linux") {
            assert!(kib.is_some_and(|k| k > 0));
        }
    }
}
