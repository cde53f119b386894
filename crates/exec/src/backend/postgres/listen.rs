//! `LISTEN` on a connection of its own: PostgreSQL's notifications, for instances that tell
//! each other which tables they wrote (live answers).

use super::{cause, db_error, PgBackend};
use crate::ExecError;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls};

/// A connection listening on one channel. Dropping it closes the connection.
pub struct Listener {
    /// Keeps the connection open.
    _client: tokio_postgres::Client,
    /// The payloads of the notifications, in order; ends when the connection breaks.
    pub payloads: mpsc::Receiver<String>,
}

impl PgBackend {
    /// Opens a connection outside the pool (a pooled one would be recycled) and listens on
    /// `channel`, a plain lower-case identifier.
    pub async fn listen(&self, channel: &str) -> Result<Listener, ExecError> {
        if channel.is_empty() || !channel.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return Err(ExecError::Invalid(format!(
                "'{channel}' is not a channel name apijet listens on"
            )));
        }
        let (client, mut connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(|e| ExecError::Connect(cause(&e)))?;
        let (tx, payloads) = mpsc::channel(1024);
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        if tx.send(n.payload().to_string()).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("the LISTEN connection broke: {}", cause(&e));
                        return;
                    }
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {channel}"))
            .await
            .map_err(db_error)?;
        Ok(Listener {
            _client: client,
            payloads,
        })
    }
}
