//! The admission seam: every piece of work a client asks of the pipeline (a call's read, write
//! or `/crud` over HTTP or as an agent's MCP tool call, a subscription's first read, a refetch
//! of it) passes [`Admission::admit`] once,
//! when it starts to run, and holds the guard it gives until its answer is complete (the task
//! of a streamed answer holds it too). What a client may cost is decided here and nowhere else.
//!
//! Today the seam keeps what visitors who are not logged in may cost at once
//! ([`AnonymousReads`]): their calls' reads (HTTP and MCP alike) are counted per address, and
//! their statements stop after `anonymous_statement_timeout_ms`.

use super::prepare::Client;
use crate::anonymous::{AnonymousReads, ReadPermit};
use apijet_response::ApiError;
use std::sync::Arc;
use std::time::Duration;

/// What a piece of work is, as admission counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A client's call over HTTP (`/{method}`, `/get/{json}`, `/router`).
    Call(Act),
    /// An agent's MCP tool call (`/mcp`, `apijet mcp`).
    Tool(Act),
    /// The first read of a subscription.
    Subscribe,
    /// A subscription read again.
    Refetch,
    /// A write the server makes itself (an account endpoint, a sign-up).
    Server,
}

/// What a call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// A read.
    Read,
    /// A write.
    Write,
    /// `/crud`.
    Crud,
}

/// The limits every piece of work is admitted under.
pub struct Admission {
    anonymous: Arc<AnonymousReads>,
}

/// Admitted work; dropping it ends it.
pub struct Admitted {
    _permit: Option<ReadPermit>,
    timeout: Option<Duration>,
}

impl Admitted {
    /// The statement timeout of the work's own, stricter than the database's, and the
    /// setting that gives it.
    pub fn timeout(&self) -> Option<(Duration, &'static str)> {
        self.timeout.map(|t| (t, "anonymous_statement_timeout_ms"))
    }
}

impl Admission {
    /// Admission under the limits of visitors who are not logged in.
    pub fn new(anonymous: Arc<AnonymousReads>) -> Admission {
        Admission { anonymous }
    }

    /// Admits `work` from `client`, or refuses it (429, naming the setting).
    pub fn admit(&self, client: &Client, work: Work) -> Result<Admitted, ApiError> {
        let anonymous = client.visitor.is_none() && work != Work::Server;
        let permit = match (work, client.address) {
            (Work::Call(Act::Read) | Work::Tool(Act::Read), Some(address)) if anonymous => self
                .anonymous
                .admit(address)
                .map_err(ApiError::TooManyRequests)?,
            _ => None,
        };
        let timeout = self.anonymous.timeout;
        Ok(Admitted {
            _permit: permit,
            timeout: (anonymous && !timeout.is_zero()).then_some(timeout),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn anonymous_at(last: u8) -> Client {
        Client {
            visitor: None,
            address: Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))),
        }
    }

    #[test]
    fn an_agents_tool_call_shares_the_anonymous_budget_of_http_calls() {
        let admission = Admission::new(AnonymousReads::new(1, Duration::from_millis(250)));
        let client = anonymous_at(1);
        let held = admission
            .admit(&client, Work::Call(Act::Read))
            .expect("the first read is admitted");
        assert!(admission.admit(&client, Work::Tool(Act::Read)).is_err());
        drop(held);
        let held = admission
            .admit(&client, Work::Tool(Act::Read))
            .expect("admitted once the call's read ended");
        assert!(admission.admit(&client, Work::Call(Act::Read)).is_err());
        assert!(
            admission
                .admit(&anonymous_at(2), Work::Tool(Act::Read))
                .is_ok(),
            "counted per address"
        );
        assert!(admission.admit(&client, Work::Server).is_ok());
        drop(held);
        for work in [Work::Call(Act::Write), Work::Tool(Act::Crud), Work::Refetch] {
            let admitted = admission.admit(&client, work).expect("admitted");
            assert_eq!(
                admitted.timeout().map(|(t, _)| t),
                Some(Duration::from_millis(250)),
                "{work:?}: anonymous work has the statement timeout"
            );
        }
        let server = admission.admit(&client, Work::Server).expect("admitted");
        assert_eq!(server.timeout(), None, "the server's own work has none");
    }
}
