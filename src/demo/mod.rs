//! The demo dataset of our own that `apijet serve` creates when the default SQLite file is absent.
//! (Stub: filled in by the demo-dataset work.)

use apijet_core::Engine;

/// The statements that (re)create the demo tables and rows on `engine`, in order.
pub fn demo_statements(_engine: Engine) -> Vec<String> {
    Vec::new()
}
