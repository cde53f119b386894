//! Every shell example of `README.md` is run, and prints what the README shows.
//!
//! # The convention (also in /work/team/README-TEST-CONVENTION.md)
//!
//! Every fenced block whose info string starts with `sh` is a shell example: it is run with
//! `bash` and what it prints is checked against the README. A shell example in another form
//! (```` ```bash ````, ```` ```console ````, ```` ```shell ````, or an untagged block whose first line
//! starts with `$ `) fails [`shell_examples_are_sh_blocks_and_only_the_setup_commands_are_not_run`]:
//! write it as ```` ```sh ````.
//!
//! **What a block prints** is written as comment lines `# → TEXT` right after the commands
//! (the block stays pasteable):
//!
//! ```text
//! curl -s localhost:8080/get -d '{"User":{"id":82001,"@column":"id,name"}}'
//! # → {"User":{"id":82001,"name":"Ada"},"ok":true,"code":200,"msg":"success","time":…}
//! ```
//!
//! - Everything the commands since the previous `# →` group printed (stdout and stderr
//!   together) must equal the group, line by line; trailing spaces and trailing empty lines do
//!   not count; `# →` alone is an empty line.
//! - A command that prints must be followed by a group; commands after a block's last group
//!   must print nothing (`T=$(…)` prints nothing).
//! - `…` in an expected line matches any text within that line (also none); a line that is
//!   only `# → …` matches any number of lines. This is how what varies between runs is
//!   normalised — `"time":…`, `"token":"…"`, ids the server generates, event ids — and how a
//!   long answer is shortened (better: `| jq …` to show the part that matters). Nothing else
//!   is normalised.
//! - Other comments (`# text`) are prose.
//!
//! **Where a block runs.** Each block in a fresh `bash` (no `set -e`: a failing command's
//! message is output like any other) in a fresh empty directory (`-c cookies`, `mine.db` land
//! there and are removed), with `apijet` on `PATH` (the binary under test), `curl` and `jq`;
//! at most [`BLOCK_TIMEOUT_SECS`]. Shell variables do not carry between blocks: a block that
//! needs a login logs in itself, as a reader pasting only that block must. Plain
//! ```` ```sh ```` blocks run in README order against one default server, `apijet serve` on a
//! fresh SQLite demo (the README's first command); `localhost:8080` and `127.0.0.1:8080` are
//! rewritten to its free port (and its address back to `127.0.0.1:8080` in what is printed).
//! Blocks see each other's writes, so a block that writes leaves the data as it found it
//! (delete what you post, undo what you put). A command must end by itself, and not by a
//! clock: a stream (`curl -N …/subscribe`) goes to a file in the background, the block waits
//! for the events it shows and then kills it (the live-answers example).
//!
//! **Blocks that need something else** say it with words after `sh` (GitHub shows none of
//! them, so the prose says it too); words combine:
//!
//! - `setup`: not run. One of the README's two set-up commands (`cargo run --release --
//!   serve`; `bash scripts/test.sh` and its argument forms), and the test checks the block holds
//!   nothing else, and that the tests (`-- accounts::`) and packages (`-p apijet-plan`) it names
//!   exist. The only exception: the first is the server this test starts, the second is
//!   what runs this test.
//! - `APIJET_NAME=value` (one or more): a server of its own (fresh SQLite demo) started with
//!   these variables, which the block's shell sees too (`$APIJET_METRICS_TOKEN`).
//! - `db=postgres` / `db=mariadb`: a server of its own on a fresh demo database in the test
//!   rig's PostgreSQL / MariaDB; the rig's server stands in for
//!   `postgres://postgres@127.0.0.1:5432` / `mysql://root@127.0.0.1:3306` in the block's
//!   commands, and is written back that way in what they print. Without that engine in the rig
//!   the block is not run (`support::skip`: a failure under `CI=true`).
//! - `server=none`: no apijet server (the commands start `apijet …` themselves, e.g.
//!   `apijet demo`); with `db=…` they reach the rig's database. `APIJET_LISTEN` is set to a
//!   free port, which stands for `127.0.0.1:8080` in what they print.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::readme_blocks::{
    fenced_blocks, output_matches, segments, shell_form, Fenced, Segment, ShellForm,
};
use crate::support::{apijet_bin, demo_database, free_port, skip, Engine, Server};
use apijet_testkit::engine::UrlParts;
use apijet_testkit::server::Launch;
use apijet_testkit::unique_temp_dir;

/// The longest a block may run.
const BLOCK_TIMEOUT_SECS: u64 = 120;
/// Separates the output of one segment from the next's (printed between them).
const MARK: &str = "@@apijet-readme-segment@@";
/// What the README calls the server it talks to.
const README_SERVER: [&str; 2] = ["localhost:8080", "127.0.0.1:8080"];

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What a `sh` block's info-string words ask for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Needs {
    setup: bool,
    env: Vec<(String, String)>,
    db: Option<Engine>,
    no_server: bool,
}

impl Needs {
    fn of(block: &Fenced) -> Result<Needs, String> {
        let mut needs = Needs::default();
        for word in block.info.iter().skip(1) {
            match word.split_once('=') {
                None if word == "setup" => needs.setup = true,
                Some(("server", "none")) => needs.no_server = true,
                Some(("db", "postgres")) => needs.db = Some(Engine::Postgres),
                Some(("db", "mariadb")) => needs.db = Some(Engine::Mariadb),
                Some((name, value)) if name.starts_with("APIJET_") => {
                    needs.env.push((name.to_string(), value.to_string()))
                }
                _ => {
                    return Err(format!(
                        "unknown word {word:?} after sh (setup, APIJET_NAME=value, \
                         db=postgres|mariadb, server=none)"
                    ))
                }
            }
        }
        if needs.setup && block.info.len() > 2 {
            return Err("a setup block takes no other words".into());
        }
        Ok(needs)
    }

    /// Whether the block runs on the shared default server.
    fn default_server(&self) -> bool {
        self.env.is_empty() && self.db.is_none() && !self.no_server
    }
}

/// The README's set-up commands: what a `setup` block may hold (besides comments).
fn is_setup_command(line: &str) -> bool {
    let line = line.trim();
    line.is_empty()
        || line.starts_with('#')
        || line == "cargo run --release -- serve"
        || line == "bash scripts/test.sh"
        || line.starts_with("bash scripts/test.sh ")
}

/// Why a set-up command names a test filter or a package that does not exist, if it does: the
/// `setup` blocks are not run, so what they name is checked here (the filter after `--` against
/// this binary's tests, `-p NAME` against the workspace's packages).
fn setup_target_missing(line: &str, tests: &[String]) -> Option<String> {
    let line = line.split(" #").next().unwrap_or(line).trim();
    let words: Vec<&str> = line.split_whitespace().collect();
    if let Some(at) = words.iter().position(|w| *w == "--") {
        let filter = words.get(at + 1)?;
        if !tests.iter().any(|t| t.contains(filter)) {
            return Some(format!("no test of `it` matches {filter:?}"));
        }
    }
    if let Some(at) = words.iter().position(|w| *w == "-p") {
        let package = words.get(at + 1)?;
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let known = std::fs::read_dir(root.join("crates"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|dir| std::fs::read_to_string(dir.path().join("Cargo.toml")).ok())
            .any(|toml| toml.contains(&format!("name = \"{package}\"")));
        if !known {
            return Some(format!("no package {package:?} under crates/"));
        }
    }
    None
}

/// The tests of this binary (`--list`).
fn tests_of_this_binary() -> Vec<String> {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args(["--list", "--format", "terse"])
        .output()
        .expect("the test binary lists its tests");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

#[test]
fn shell_examples_are_sh_blocks_and_only_the_setup_commands_are_not_run() {
    let tests = tests_of_this_binary();
    assert!(
        tests.iter().any(|t| t.starts_with("readme::")),
        "the test binary lists its tests: {tests:?}"
    );
    let mut problems = Vec::new();
    let mut setups = 0;
    for block in fenced_blocks(&readme()) {
        match shell_form(&block) {
            ShellForm::Other => continue,
            ShellForm::Refused(why) => problems.push(format!("README.md:{}: {why}", block.line)),
            ShellForm::Sh => match Needs::of(&block) {
                Err(e) => problems.push(format!("README.md:{}: {e}", block.line)),
                Ok(needs) if needs.setup => {
                    setups += 1;
                    for (i, line) in block.body.iter().enumerate() {
                        if !is_setup_command(line) {
                            problems.push(format!(
                                "README.md:{}: a setup block holds {line:?}, which is not one of \
                                 the two set-up commands: write it as a block that runs",
                                block.line + 1 + i
                            ));
                        } else if let Some(why) = setup_target_missing(line, &tests) {
                            problems.push(format!("README.md:{}: {why}", block.line + 1 + i));
                        }
                    }
                    if block
                        .body
                        .iter()
                        .any(|l| l.contains(crate::support::readme_blocks::OUTPUT))
                    {
                        problems.push(format!(
                            "README.md:{}: a setup block is not run, so it shows no output",
                            block.line
                        ));
                    }
                }
                Ok(_) => {}
            },
        }
    }
    assert!(
        setups >= 2,
        "the README shows its two set-up commands in ```sh setup blocks ({setups} found)"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A directory removed when the test ends, also when it fails.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Address rewrites of one block: README text → the test's, forward into the commands and
/// backward in what they print.
type Rewrites = Vec<(String, String)>;

/// The rig's stand-in for the README's `postgres://postgres@127.0.0.1:5432` or
/// `mysql://root@127.0.0.1:3306`, and the URL of its admin database.
fn rig_rewrites(engine: Engine) -> Option<Rewrites> {
    let rig = UrlParts::parse(&engine.url()?).ok()?;
    let (readme_authority, readme_addr) = match engine {
        Engine::Postgres => ("postgres://postgres@127.0.0.1:5432", "127.0.0.1:5432"),
        _ => ("mysql://root@127.0.0.1:3306", "127.0.0.1:3306"),
    };
    let port = rig.port.unwrap_or(match engine {
        Engine::Postgres => 5432,
        _ => 3306,
    });
    let addr = format!("{}:{port}", rig.host);
    let mut authority = format!("{}://{}", rig.scheme, rig.user);
    if let Some(pw) = &rig.password {
        authority.push_str(&format!(":{pw}"));
    }
    authority.push_str(&format!("@{addr}"));
    Some(vec![
        (readme_authority.to_string(), authority),
        (readme_addr.to_string(), addr),
    ])
}

fn server_rewrites(server: &Server) -> Rewrites {
    README_SERVER
        .iter()
        .map(|from| (from.to_string(), format!("127.0.0.1:{}", server.port)))
        .collect()
}

/// Runs one block: its segments as one bash script, a mark printed after each; returns what
/// each segment printed (the last: after the last group), or why it could not run.
fn run_block(
    segments: &[Segment],
    rewrites: &Rewrites,
    env: &[(String, String)],
    path: &str,
    dir: &Path,
) -> Result<Vec<String>, String> {
    let mut script = String::from("exec 2>&1\n");
    for (i, segment) in segments.iter().enumerate() {
        for line in &segment.commands {
            let mut line = line.clone();
            for (from, to) in rewrites {
                line = line.replace(from.as_str(), to);
            }
            script.push_str(&line);
            script.push('\n');
        }
        if i + 1 < segments.len() {
            script.push_str(&format!("printf '\\n%s\\n' '{MARK}'\n"));
        }
    }
    let file = dir.join("block.sh");
    std::fs::write(&file, &script).map_err(|e| format!("writing {}: {e}", file.display()))?;
    let out = Command::new("timeout")
        .args(["-k", "5", &BLOCK_TIMEOUT_SECS.to_string(), "bash"])
        .arg(&file)
        .current_dir(dir)
        .env("PATH", path)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    let _ = std::fs::remove_file(&file);
    if out.status.code() == Some(124) {
        return Err(format!("did not finish within {BLOCK_TIMEOUT_SECS} s"));
    }
    let mut printed = String::from_utf8_lossy(&out.stdout).into_owned();
    // Backward, the last rewrite first: the server's address becomes 127.0.0.1:8080.
    for (from, to) in rewrites.iter().rev() {
        printed = printed.replace(to.as_str(), from);
    }
    Ok(printed
        .split(&format!("\n{MARK}\n"))
        .map(str::to_string)
        .collect())
}

/// What a block that does not run on the default server runs against: its own server (none
/// with `server=none`) and the address rewrites; `None` when the rig lacks its engine (said).
fn own_setting(
    needs: &Needs,
    block: &Fenced,
) -> Result<Option<(Option<Server>, Rewrites)>, String> {
    let mut rewrites = match needs.db {
        None => Vec::new(),
        Some(engine) => match rig_rewrites(engine) {
            Some(r) => r,
            None => {
                skip(&format!(
                    "README.md:{}: a db={engine} block, and the rig provides no {engine}: not run",
                    block.line
                ));
                return Ok(None);
            }
        },
    };
    if needs.no_server {
        return Ok(Some((None, rewrites)));
    }
    let env: Vec<(&str, &str)> = needs
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let server = match needs.db {
        None => Server::fresh_sqlite_env("", &env),
        Some(engine) => {
            let name = format!("readme_line_{}", block.line);
            let url = demo_database(&name, engine)
                .ok_or_else(|| format!("no {engine} for README.md:{}", block.line))?;
            Server::launch(Launch::serve(&url, "").env(&env))?
        }
    };
    rewrites.extend(server_rewrites(&server));
    Ok(Some((Some(server), rewrites)))
}

/// `PATH` with a directory holding `apijet` (the binary under test) first.
fn path_with_apijet(scratch: &Path) -> String {
    let bin_dir = scratch.join("bin");
    std::fs::create_dir_all(&bin_dir).expect("bin dir");
    std::os::unix::fs::symlink(apijet_bin(), bin_dir.join("apijet")).expect("apijet symlink");
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{}:{path}", bin_dir.display())
}

/// Whether `tool` runs (`tool --version`).
fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn every_shell_example_prints_what_the_readme_shows() {
    for tool in ["bash", "curl", "jq", "timeout"] {
        if !have(tool) {
            skip(&format!(
                "readme: {tool} is missing, the README's examples need it"
            ));
            return;
        }
    }
    let scratch = Scratch(unique_temp_dir("apijet-readme").expect("temp dir"));
    let path = path_with_apijet(&scratch.0);
    let default_server = Server::fresh_sqlite("");
    let default_rewrites = server_rewrites(&default_server);

    let mut failures = Vec::new();
    let mut ran = BTreeMap::new();
    for block in fenced_blocks(&readme()) {
        if shell_form(&block) != ShellForm::Sh {
            continue;
        }
        let needs = match Needs::of(&block) {
            Ok(n) if n.setup => continue,
            Ok(n) => n,
            Err(e) => {
                failures.push(format!("README.md:{}: {e}", block.line));
                continue;
            }
        };
        // The block's server lives as long as this iteration.
        let (_own, rewrites) = if needs.default_server() {
            (None, default_rewrites.clone())
        } else {
            match own_setting(&needs, &block) {
                Ok(Some(setting)) => setting,
                Ok(None) => continue,
                Err(e) => {
                    failures.push(format!("README.md:{}: its server: {e}", block.line));
                    continue;
                }
            }
        };
        let dir = scratch.0.join(format!("block-{}", block.line));
        std::fs::create_dir_all(&dir).expect("block dir");
        let parts = segments(&block);
        let (mut rewrites, mut env) = (rewrites, needs.env.clone());
        if needs.no_server {
            // An `apijet serve` of the block's own listens on a free port, not on 8080.
            let addr = format!("127.0.0.1:{}", free_port());
            env.push(("APIJET_LISTEN".into(), addr.clone()));
            rewrites.extend(
                README_SERVER
                    .iter()
                    .map(|from| (from.to_string(), addr.clone())),
            );
        }
        let printed = match run_block(&parts, &rewrites, &env, &path, &dir) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("README.md:{}: {e}", block.line));
                continue;
            }
        };
        *ran.entry(block.line).or_insert(0) += parts.len();
        if printed.len() != parts.len() {
            failures.push(format!(
                "README.md:{}: the block stopped early (an `exit`?): printed {printed:?}",
                block.line
            ));
            continue;
        }
        for (segment, got) in parts.iter().zip(&printed) {
            if !output_matches(&segment.expected, got) {
                let shown = match segment.expected.is_empty() {
                    true => "nothing (no `# →` lines follow)".to_string(),
                    false => format!("\n# → {}", segment.expected.join("\n# → ")),
                };
                failures.push(format!(
                    "README.md:{}: the commands\n{}\nprinted\n{}\nwhere the README shows {shown}",
                    segment.line,
                    segment.commands.join("\n").trim(),
                    got.trim_end()
                ));
            }
        }
    }
    drop(default_server);
    eprintln!(
        "readme: {} shell blocks run ({} segments)",
        ran.len(),
        ran.values().sum::<usize>()
    );
    assert!(!ran.is_empty(), "no shell example found in README.md");
    assert!(
        failures.is_empty(),
        "{} README examples do not print what the README shows:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
