//! The server launcher: an `apijet` child process on a free port of 127.0.0.1 (`apijet serve`
//! with a TOML written for it, or any other subcommand that listens), its output in files, ready
//! once it answers HTTP, killed when dropped (also when a test panics); plus the readings of
//! that process the tests and the bench take from `/proc` (RSS, peak RSS, CPU time).

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::Client;
use crate::{free_port, tail, unique_temp_dir};

/// How long [`Server::start`] waits for the server to answer HTTP.
pub const SERVER_START_TIMEOUT: Duration = Duration::from_secs(30);

/// The `apijet` executable: `APIJET_BIN` when set, else the one cargo built beside the running
/// executable (an integration test runs from `target/<profile>/deps/`, the binary is
/// `target/<profile>/apijet`; cargo builds it before it runs the package's tests).
pub fn apijet_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("APIJET_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the path of the running executable");
    let name = format!("apijet{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1)
        .take(3)
        .map(|dir| dir.join(&name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no {name} beside {} (build it with cargo, or set APIJET_BIN)",
                exe.display()
            )
        })
}

/// The arguments of a process, given `127.0.0.1:PORT` to listen on and the path of its
/// `config.toml`.
pub type Args = Box<dyn FnOnce(SocketAddr, &Path) -> Vec<OsString>>;

/// How to start one process: the binary, its arguments, its config file, extra environment,
/// and the directory for its files.
pub struct Launch {
    /// The executable; [`apijet_bin`] when `None`.
    pub bin: Option<PathBuf>,
    /// Says in errors what was started, e.g. `apijet serve`.
    pub what: String,
    pub args: Args,
    /// Written to `config.toml` in the directory before the process starts.
    pub config_toml: Option<String>,
    pub env: Vec<(String, String)>,
    /// Where `config.toml`, `stdout.log` and `stderr.log` go: a directory of its own that the
    /// server removes when dropped (`None`), or one the caller keeps.
    pub dir: Option<PathBuf>,
    pub timeout: Duration,
}

impl Launch {
    /// `apijet serve --db DB_URL --listen 127.0.0.1:PORT --config DIR/config.toml` with
    /// `config_toml` written there, by the [`apijet_bin`] binary, in a directory of its own.
    pub fn serve(db_url: &str, config_toml: &str) -> Launch {
        let db_url = db_url.to_string();
        Launch {
            bin: None,
            what: "apijet serve".into(),
            args: Box::new(move |addr, config| {
                vec![
                    "serve".into(),
                    "--db".into(),
                    db_url.into(),
                    "--listen".into(),
                    addr.to_string().into(),
                    "--config".into(),
                    config.into(),
                ]
            }),
            config_toml: Some(config_toml.to_string()),
            env: Vec::new(),
            dir: None,
            timeout: SERVER_START_TIMEOUT,
        }
    }

    /// The same, with this binary (the bench starts the executable that runs it).
    pub fn bin(self, bin: &Path) -> Launch {
        Launch {
            bin: Some(bin.to_path_buf()),
            ..self
        }
    }

    /// The same, with its files in `dir`, kept when the server is dropped.
    pub fn dir(self, dir: &Path) -> Launch {
        Launch {
            dir: Some(dir.to_path_buf()),
            ..self
        }
    }

    /// The same, with extra environment variables (e.g. `APIJET_LOG`).
    pub fn env(mut self, env: &[(&str, &str)]) -> Launch {
        self.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }

    /// The same, waiting up to `timeout` for the first answer.
    pub fn timeout(self, timeout: Duration) -> Launch {
        Launch { timeout, ..self }
    }
}

/// A running server. Dropping it kills the process (and removes its directory when it made it).
pub struct Server {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub port: u16,
    pub addr: SocketAddr,
    pub pid: u32,
    child: Child,
    dir: PathBuf,
    owns_dir: bool,
}

impl Server {
    /// Starts `apijet serve` on `db_url` with `config_toml` and waits until it answers. Panics
    /// with the server's output when it exits early or does not come up within
    /// [`SERVER_START_TIMEOUT`].
    pub fn start(db_url: &str, config_toml: &str) -> Server {
        Server::try_start(db_url, config_toml).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Server::start`], with the failure as an error.
    pub fn try_start(db_url: &str, config_toml: &str) -> Result<Server, String> {
        Server::launch(Launch::serve(db_url, config_toml))
    }

    /// A server on a new SQLite file in its own directory (apijet creates it with the demo
    /// dataset); the file goes when the server is dropped.
    pub fn fresh_sqlite(config_toml: &str) -> Server {
        Server::fresh_sqlite_env(config_toml, &[])
    }

    /// [`Server::fresh_sqlite`] with extra environment variables (e.g. `APIJET_LOG`).
    pub fn fresh_sqlite_env(config_toml: &str, env: &[(&str, &str)]) -> Server {
        let dir = unique_temp_dir("apijet-server").expect("temp dir");
        let url = format!("sqlite://{}", dir.join("demo.db").display());
        let launch = Launch {
            dir: Some(dir.clone()),
            ..Launch::serve(&url, config_toml).env(env)
        };
        let mut server = Server::launch(launch).unwrap_or_else(|e| panic!("{e}"));
        server.owns_dir = true;
        server
    }

    /// Starts what `launch` says and waits until it answers HTTP.
    pub fn launch(launch: Launch) -> Result<Server, String> {
        let (dir, owns_dir) = match launch.dir {
            Some(d) => (d, false),
            None => (
                unique_temp_dir("apijet-server")
                    .map_err(|e| format!("cannot create a temp dir: {e}"))?,
                true,
            ),
        };
        fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let port = free_port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let config = dir.join("config.toml");
        if let Some(text) = &launch.config_toml {
            fs::write(&config, text)
                .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        }
        let args = (launch.args)(addr, &config);
        let open_log = |name: &str| {
            fs::File::create(dir.join(name))
                .map_err(|e| format!("cannot create {name} in {}: {e}", dir.display()))
        };
        let (stdout, stderr) = (open_log("stdout.log")?, open_log("stderr.log")?);
        let bin = launch.bin.unwrap_or_else(apijet_bin);
        let child = Command::new(&bin)
            .args(&args)
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut server = Server {
            base: format!("http://{addr}"),
            port,
            addr,
            pid: child.id(),
            child,
            dir,
            owns_dir,
        };
        server.wait_ready(&launch.what, launch.timeout)?;
        Ok(server)
    }

    /// Waits until the process answers HTTP (any status: the port is bound before the database
    /// is opened, and some servers the bench starts have no `/health`).
    fn wait_ready(&mut self, what: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                return Err(format!(
                    "{what} exited early ({status}):\n{}",
                    self.output_tail(4000)
                ));
            }
            if answers_http(self.addr) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{what} did not answer on {} within {} s:\n{}",
                    self.addr,
                    timeout.as_secs(),
                    self.output_tail(4000)
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: the process gets no chance to finish anything.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends a signal (`TERM`, `INT`, `HUP`) to the process with `kill -s`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args(["-s", name, &self.pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -s {name} failed");
    }

    /// Waits up to `timeout` for the process to end; its status, or `None` if it still runs.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The exit status when the process has ended.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// The server's directory (its config, logs and, for [`Server::fresh_sqlite`], database).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The last `max` characters of the server's stderr (and stdout, when it printed anything).
    pub fn output_tail(&self, max: usize) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        let (out, err) = (read("stdout.log"), read("stderr.log"));
        let mut text = format!("--- stderr ---\n{}", tail(&err, max));
        if !out.trim().is_empty() {
            text.push_str(&format!("\n--- stdout ---\n{}", tail(&out, max)));
        }
        text
    }

    /// The server's resident memory in KiB (Linux `/proc`), `None` where it cannot be read.
    pub fn rss_kib(&self) -> Option<u64> {
        status_kib(self.pid, "VmRSS")
    }

    /// The server's peak resident memory so far in KiB (Linux `/proc`).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        status_kib(self.pid, "VmHWM")
    }

    /// Resets the kernel's peak-RSS counter (`VmHWM`) so that it covers what follows.
    pub fn reset_peak(&self) {
        let _ = fs::write(format!("/proc/{}/clear_refs", self.pid), "5");
    }

    /// Samples `VmRSS` every 10 ms until the returned sampler is stopped.
    pub fn sample_rss(&self) -> RssSampler {
        RssSampler::start(self.pid)
    }

    /// The CPU time the server has used so far, in seconds (Linux `/proc`, 100 ticks a
    /// second), `None` where it cannot be read.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // The fields after the command name (which may hold spaces) in parentheses.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / 100.0)
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A new client without cookies for this server.
    pub fn client(&self) -> Client {
        Client::new(&self.base)
    }

    /// POSTs `body` (sent as is, `Content-Type: application/json`) and returns the JSON answer.
    /// Panics on a transport error or when the answer is not JSON.
    pub fn post(&self, path: &str, body: &str) -> Value {
        self.client()
            .post(path, body)
            .and_then(|r| r.json())
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// POSTs `body` as JSON and returns the JSON answer (panics like [`Server::post`]).
    pub fn post_json(&self, path: &str, body: &Value) -> Value {
        self.post(path, &body.to_string())
    }

    /// GETs `path` and returns the JSON answer (panics like [`Server::post`]).
    pub fn get(&self, path: &str) -> Value {
        self.client()
            .get(path)
            .and_then(|r| r.json())
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.owns_dir {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Whether something on `addr` answers `GET /health` with an HTTP status line (blocking, std
/// only: the bench calls this from inside its runtime).
fn answers_http(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    let sent = write!(
        s,
        "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut head = [0u8; 8];
    sent.is_ok() && s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`), `None` where it cannot be read.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// A background reader of a process's RSS, keeping the largest value seen.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peak));
        let thread = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(kib) = status_kib(pid, "VmRSS") {
                    p.fetch_max(kib, Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(10));
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
