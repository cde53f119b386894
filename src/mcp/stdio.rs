//! `apijet mcp --db URL`: the MCP server over stdio, for agent hosts that start it as a child
//! process on the same machine. It serves the database as `apijet serve` would (the same
//! configuration, snapshot and request entry), as one visitor chosen at start: a token of
//! `/login` (signed with this configuration's `token_secret`), or a phone and password logged
//! in through the accounts code (and logged in again when the login expires); neither: not
//! logged in. Nothing but MCP messages is written to stdout.

use super::call::ToolAnswer;
use super::{Caller, Mcp, Settings};
use crate::app::AppState;
use crate::config::Config;
use apijet_core::Visitor;
use rmcp::ServiceExt;
use std::sync::Arc;
use std::time::SystemTime;

/// Who the stdio server acts as, as given on its command line or in its environment.
#[derive(Default)]
pub struct Identity {
    pub token: Option<String>,
    pub phone: Option<String>,
    pub password: Option<String>,
}

/// The login of a stdio server.
pub(crate) struct Login {
    /// A phone and password to log in with again when the login expires.
    credentials: Option<(String, String)>,
    /// The visitor and when its login ends; none: not logged in.
    current: tokio::sync::Mutex<Option<(Visitor, SystemTime)>>,
}

impl Login {
    /// Checks the identity given at start: a bad token or a wrong password fails the start.
    async fn start(state: &AppState, identity: Identity) -> Result<Login, String> {
        let current = match (identity.token, identity.phone, identity.password) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err("give either --token or --phone with --password, not both".into())
            }
            (Some(token), None, None) => Some(verify(state, &token)?),
            (None, Some(phone), Some(password)) => {
                let current = log_in(state, &phone, &password).await?;
                return Ok(Login {
                    credentials: Some((phone, password)),
                    current: tokio::sync::Mutex::new(Some(current)),
                });
            }
            (None, None, None) => None,
            _ => return Err("--phone and --password go together".into()),
        };
        Ok(Login {
            credentials: None,
            current: tokio::sync::Mutex::new(current),
        })
    }

    /// The caller of a tool call now: logged in again when the login expired and a password
    /// was given; without one an expired login is refused (407), never silently anonymous.
    pub(crate) async fn caller(&self, state: &AppState) -> Result<Caller, ToolAnswer> {
        let mut current = self.current.lock().await;
        let Some((visitor, until)) = &*current else {
            return Ok(Caller::default());
        };
        if SystemTime::now() < *until {
            return Ok(Caller {
                visitor: Some(visitor.clone()),
                ..Caller::default()
            });
        }
        let Some((phone, password)) = &self.credentials else {
            return Err(ToolAnswer::refused(
                407,
                "the token apijet mcp was started with has expired: start it again with a new \
                 token from /login (or with --phone and --password, which log in again)",
            ));
        };
        let fresh = log_in(state, phone, password)
            .await
            .map_err(|e| ToolAnswer::refused(407, &format!("logging in again failed: {e}")))?;
        let visitor = fresh.0.clone();
        *current = Some(fresh);
        Ok(Caller {
            visitor: Some(visitor),
            ..Caller::default()
        })
    }
}

fn verify(state: &AppState, token: &str) -> Result<(Visitor, SystemTime), String> {
    state
        .sessions
        .key
        .verify_until(token.trim(), SystemTime::now())
        .map_err(|e| {
            format!(
                "the token given to apijet mcp is not valid ({e}): it has expired, or another \
                 token_secret signed it (give apijet mcp the token_secret of the server that \
                 issued it, e.g. APIJET_TOKEN_SECRET)"
            )
        })
}

/// Logs in as `/login` does, from no client address, and reads the visitor from the token.
async fn log_in(
    state: &AppState,
    phone: &str,
    password: &str,
) -> Result<(Visitor, SystemTime), String> {
    let body = serde_json::json!({"phone": phone, "password": password}).to_string();
    let logged_in = state
        .accounts
        .login(body.as_bytes(), None)
        .await
        .map_err(|e| format!("logging in as {phone} failed ({}): {e}", e.code()))?;
    verify(state, &logged_in.token)
}

/// Runs the stdio server until its client closes stdin.
pub async fn run(mut cfg: Config, identity: Identity) -> Result<(), String> {
    // Without a token from elsewhere, every token is made and read by this process: a key of
    // its own is right, and the server's warning about one would only mislead.
    if cfg.token_secret.is_none() && identity.token.is_none() {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| format!("no random key: {e}"))?;
        cfg.token_secret = Some(key.iter().map(|b| format!("{b:02x}")).collect());
    }
    let state = Arc::new(AppState::start(&cfg).await?);
    let login = Login::start(&state, identity).await?;
    let mcp = Mcp::new(state, Settings::of(&cfg), Some(login));
    let running = mcp
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the MCP client did not start a session: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("the MCP server stopped: {e}"))?;
    Ok(())
}
