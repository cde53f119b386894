//! The integration tests: one binary, a module per behaviour. Each starts `apijet` as a child
//! process (the test kit's launcher, `apijet_testkit::Server`) on throwaway databases: SQLite
//! always, PostgreSQL and MariaDB when `scripts/test.sh` (or the environment) provides them.
//!
//! Run one topic with `bash scripts/test.sh --test it -- accounts::`, one test with
//! `bash scripts/test.sh --test it -- accounts::codes_expire_and_stay_hidden_unless_configured`.
//! Tests run two at a time across all modules: anything a test creates outside its own server
//! (a database, a file) carries a name no other test uses (`support::claim`).

mod support;

// The protocol: what a request means and answers.
mod apiauto_requests;
mod conformance;
mod demo_api;
mod explain_statements;
mod key_audit;
mod nested_stream;
mod plans_by_shape;
mod protocol_expressions;
mod protocol_joins;
mod protocol_small;
mod writes;

// Answers kept in memory.
mod answer_cache;
mod change_feed;

// Who may do what.
mod access;
mod accounts;
mod column_gate;
mod passwords_at_rest;
mod phone_spellings;
mod writes_only_by_post;

// Hostile input and limits.
mod budgets;
mod budgets_under_mixes;
mod client_identity;
mod edge;
mod hostile_input;
mod hostile_rules;
mod refusal_messages;
mod request_cost;

// Operations and the surfaces around the API.
mod cluster;
mod command_help;
mod demo_command;
mod exposure;
mod mcp;
mod openapi;
mod ops;
mod readme;
mod schema_lookup;

// The source tree.
mod layout;

// Live answers (/subscribe).
mod live_answers;
mod live_multiplex;
mod live_rules;

// In a real browser.
mod apiauto;
mod console;
