//! `--help` of every command says where its settings come from: `serve` names its file
//! (`--config FILE`, apijet.example.toml) and its `APIJET_*` variables; the others say which
//! variables they read, or that they read none.

use std::process::Command;

use crate::support::apijet_bin;

fn help(args: &[&str]) -> String {
    let out = Command::new(apijet_bin())
        .args(args)
        .arg("--help")
        .output()
        .expect("apijet runs");
    assert!(out.status.success(), "apijet {args:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The commands `apijet --help` lists (but `help`).
fn commands() -> Vec<String> {
    help(&[])
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_help_says_where_its_settings_come_from() {
    let commands = commands();
    assert!(commands.iter().any(|c| c == "serve"), "{commands:?}");
    for command in &commands {
        for flag in ["--help", "-h"] {
            let out = Command::new(apijet_bin())
                .args([command.as_str(), flag])
                .output()
                .expect("apijet runs");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains("Settings") && text.contains("APIJET_"),
                "apijet {command} {flag} does not say where its settings come from:\n{text}"
            );
        }
    }
    let serve = help(&["serve"]);
    for named in [
        "--config FILE",
        "apijet.example.toml",
        "APIJET_DB",
        "APIJET_LISTEN",
    ] {
        assert!(
            serve.contains(named),
            "serve --help does not name {named}:\n{serve}"
        );
    }
    assert!(
        help(&[]).contains("APIJET_LOG"),
        "apijet --help: APIJET_LOG"
    );
}
