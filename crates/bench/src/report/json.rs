//! The run as one JSON document (`results.json`): every row with its tool, mode, connection
//! level and rate, the machine and the engine versions, so runs can be compared by script.

use super::Report;
use std::path::Path;

/// Writes `report` as pretty JSON to `path`.
pub fn write(report: &Report, path: &Path) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}
