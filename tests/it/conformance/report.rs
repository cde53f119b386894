//! Known failures (`tests/it/conformance/known-failures.txt`) and the per-stage report.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use super::{Case, Outcome};

/// `tests/it/conformance/known-failures.txt`: `REF-ID reason`, or `ENGINE/REF-ID reason` for one
/// engine only (`postgres`, `mariadb`, `spider`); `#` starts a comment line.
pub(crate) struct KnownFailures {
    entries: HashMap<(Option<String>, String), String>,
}

impl KnownFailures {
    pub(crate) fn read(path: &Path) -> KnownFailures {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => panic!("cannot read {}: {e}", path.display()),
        };
        let mut entries = HashMap::new();
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (key, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let (engine, id) = match key.split_once('/') {
                Some((engine, id)) => (Some(engine.to_string()), id.to_string()),
                None => (None, key.to_string()),
            };
            entries.insert((engine, id), reason.trim().to_string());
        }
        KnownFailures { entries }
    }

    /// Why a case is listed for the engine `name`, if it is.
    pub(crate) fn reason(&self, name: &str, id: &str) -> Option<&str> {
        self.entries
            .get(&(None, id.to_string()))
            .or_else(|| self.entries.get(&(Some(name.to_string()), id.to_string())))
            .map(String::as_str)
    }

    /// Entries for the engine `name` that name no replayed case (typos, renamed cases).
    pub(crate) fn unknown_ids<'a>(
        &self,
        name: &str,
        cases: impl IntoIterator<Item = &'a Case>,
    ) -> Vec<String> {
        let ids: HashSet<&str> = cases.into_iter().map(|c| c.id.as_str()).collect();
        let mut unknown: Vec<String> = self
            .entries
            .keys()
            .filter(|(e, id)| e.as_deref().is_none_or(|e| e == name) && !ids.contains(id.as_str()))
            .map(|(e, id)| e.as_ref().map_or(id.clone(), |e| format!("{e}/{id}")))
            .collect();
        unknown.sort();
        unknown
    }
}

pub(crate) struct Report {
    pub(crate) text: String,
    /// Failed cases not listed as known failures.
    pub(crate) regressions: Vec<String>,
}

impl Report {
    /// The report of one stage: one line per case that did not pass (`known` for a documented
    /// deviation, `FAIL` for anything else), then one summary line,
    /// `{title} [ENGINE]: N passed, K known deviations, M failed` (and `, D order-dependent`
    /// when some answers differ only in the row order the request leaves to the engine).
    /// `unknown` are the known-failures entries that name no replayed case.
    pub(crate) fn build(
        name: &str,
        title: &str,
        cases: &[Case],
        outcomes: &[Outcome],
        known: &KnownFailures,
        unknown: &[String],
    ) -> Report {
        let (mut text, mut regressions, mut now_passing) = (String::new(), Vec::new(), Vec::new());
        let (mut passed, mut deviations, mut order_dependent) = (0, 0, 0);
        for (case, outcome) in cases.iter().zip(outcomes) {
            let reason = known.reason(name, &case.id);
            match outcome {
                Outcome::Pass => {
                    passed += 1;
                    if reason.is_some() {
                        now_passing.push(case.id.as_str());
                    }
                }
                Outcome::Fail(why) => match reason {
                    Some(reason) => {
                        deviations += 1;
                        let _ =
                            writeln!(text, "known [{name}] {} {}: {reason}", case.id, case.name);
                    }
                    None => {
                        let _ = writeln!(text, "FAIL [{name}] {} {}: {why}", case.id, case.name);
                        regressions.push(case.id.clone());
                    }
                },
                Outcome::OrderDependent(why) => {
                    order_dependent += 1;
                    let _ = writeln!(
                        text,
                        "order-dependent [{name}] {} {}: {why}",
                        case.id, case.name
                    );
                }
            }
        }
        for id in now_passing {
            let _ = writeln!(text, "NOW PASSING (remove from known-failures): {id}");
        }
        for id in unknown {
            let _ = writeln!(
                text,
                "known-failures.txt lists {id}, which is not a replayed case"
            );
        }
        for id in &regressions {
            let _ = writeln!(
                text,
                "REGRESSION [{name}] {id}: fails and is not listed in known-failures.txt"
            );
        }
        let _ = write!(
            text,
            "{title} [{name}]: {passed} passed, {deviations} known deviations, {} failed",
            regressions.len()
        );
        if order_dependent > 0 {
            let _ = write!(text, ", {order_dependent} order-dependent");
        }
        text.push('\n');
        Report { text, regressions }
    }
}
