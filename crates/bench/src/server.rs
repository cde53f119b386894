//! The apijet servers under test: the server binary (`apijet serve`) started by the kit's
//! launcher with a TOML written for the scenario, and the hand-written endpoint beside it, a
//! process of this binary.

use apijet_testkit::server::Launch;
pub use apijet_testkit::server::Server;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a server may take to answer (a cold start on a loaded machine).
const START_TIMEOUT: Duration = Duration::from_secs(120);

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

/// The server binary to measure: `APIJET_BIN` (which `apijet bench` sets to itself), else the
/// `apijet` beside this executable (both are built into the same `target/<profile>/`).
pub fn apijet_beside() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("APIJET_BIN").filter(|b| !b.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    let exe = this_binary()?;
    let bin = exe.with_file_name(format!("apijet{}", std::env::consts::EXE_SUFFIX));
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "no apijet binary beside {} (build it: cargo build --release -p apijet), or give \
             --apijet-bin",
            exe.display()
        ))
    }
}

/// This executable (`apijet-bench`): the kit's helper processes (the hand-written endpoint,
/// the live subscribers) are started from it.
pub fn this_binary() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))
}

/// Starts `apijet serve` (the binary `apijet`) on `db_url` with `cfg`, its files in `work`, and
/// waits until it answers.
pub fn start(
    apijet: &Path,
    db_url: &str,
    cfg: &ServerConfig,
    work: &Path,
) -> Result<Server, String> {
    start_toml(apijet, db_url, &cfg.toml(), work)
}

/// Starts `apijet serve` on `db_url` with the settings `toml`.
pub fn start_toml(apijet: &Path, db_url: &str, toml: &str, work: &Path) -> Result<Server, String> {
    Server::launch(
        Launch::serve(db_url, toml)
            .bin(apijet)
            .dir(work)
            .timeout(START_TIMEOUT),
    )
}

/// Starts the hand-written endpoint ([`crate::handwritten`]) for `lookup` on `db_url`, a
/// process of its own started from this binary, and waits until it answers.
pub fn start_handwritten(
    db_url: &str,
    lookup: &crate::handwritten::Lookup,
    work: &Path,
) -> Result<Server, String> {
    let (spec, db_url) = (lookup.spec(), db_url.to_string());
    Server::launch(Launch {
        bin: Some(this_binary()?),
        what: "the hand-written endpoint".into(),
        args: Box::new(move |addr, _| {
            vec![
                "--serve-handwritten".into(),
                spec.into(),
                "--handwritten-db".into(),
                db_url.into(),
                "--handwritten-listen".into(),
                addr.to_string().into(),
            ]
        }),
        config_toml: None,
        env: Vec::new(),
        dir: Some(work.to_path_buf()),
        timeout: START_TIMEOUT,
    })
}
