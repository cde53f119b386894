//! The first stage: a call as an entry point received it becomes a request ready to plan. Once,
//! here, for every entry point: the body parsed, the tag shortcut and the URL parameters merged
//! into it, the login checks, the `Request` structure of a private method verified, and a
//! read's condition values taken out into slots (its shape).

use super::crud::crud_parts;
use super::snapshot::Snapshot;
use super::Pipeline;
use crate::client::ClientKey;
use crate::observe::Facts;
use apijet_core::{Method, Visitor};
use apijet_plan::shape::{take_values, Slots};
use apijet_plan::verify::{verify, ExistenceCheck, Verified};
use apijet_plan::{PlanError, PlanOptions};
use apijet_request::{is_table_key, parse_body, Request};
use apijet_response::ApiError;
use serde_json::{Map, Value as Json};
use std::sync::Arc;

/// Who asks: the visitor a session names, and the client it calls from.
#[derive(Debug, Clone, Default)]
pub struct Client {
    /// The visitor, if logged in.
    pub visitor: Option<Visitor>,
    /// The client's key (its address, IPv6 by /64, or what a trusted proxy says), when known:
    /// the ledger counts its work by it.
    pub key: Option<ClientKey>,
}

impl Client {
    /// Who the ledger counts the work for.
    pub fn counted(&self) -> crate::ledger::Client {
        crate::ledger::Client {
            key: self.key,
            logged_in: self.visitor.is_some(),
        }
    }
}

/// A call's body: as the client sent it, or a JSON object already (a `/router` template with
/// the client's body merged into it).
pub enum Body<'a> {
    /// The bytes sent.
    Sent(&'a [u8]),
    /// An object.
    Object(Map<String, Json>),
}

/// One APIJSON call as an entry point received it.
pub struct Call<'a> {
    /// The method's name (`/{method}`).
    pub method: &'a str,
    /// The `/{method}/{tag}` tag shortcut.
    pub tag: Option<&'a str>,
    /// URL parameters, merged into the root.
    pub query: &'a [(String, String)],
    /// The body.
    pub body: Body<'a>,
}

/// A read with its condition values in slots: its shape (what read plans are kept by) and
/// its values.
#[derive(Debug, Clone)]
pub struct Shaped {
    /// GET, HEAD, GETS or HEADS.
    pub method: Method,
    /// The request, its condition values in slots.
    pub req: Request,
    /// The values, slot by slot.
    pub values: Slots,
}

/// A write, verified by its `Request` structure.
#[derive(Debug)]
pub struct Writing {
    /// POST, PUT or DELETE.
    pub method: Method,
    /// The request as the structure rewrote it.
    pub req: Request,
    /// The structure's UNIQUE and EXIST checks.
    pub checks: Vec<ExistenceCheck>,
    /// The server's own write (an account endpoint, a sign-up): planned without roles.
    pub trusted: bool,
}

/// What a prepared call asks.
#[derive(Debug)]
pub enum Asked {
    /// A read.
    Read(Shaped),
    /// A write.
    Write(Writing),
    /// `/crud`: its parts in request order, each a read or a write under the key it answers.
    Crud(Vec<(String, Asked)>),
}

/// A call ready to plan, with the snapshot its checks were made against.
pub struct Prepared {
    /// What the database said the API was when the call was prepared.
    pub snapshot: Arc<Snapshot>,
    /// What it asks.
    pub asked: Asked,
}

impl Pipeline {
    /// Prepares a call by `client`; `facts` learn its tables and how long its parse took.
    pub fn prepare(
        &self,
        call: Call<'_>,
        client: &Client,
        facts: &mut Facts,
    ) -> Result<Prepared, ApiError> {
        let method = Method::from_url(call.method)
            .ok_or_else(|| ApiError::UnknownMethod(call.method.to_string()))?;
        let visitor = client.visitor.as_ref();
        if let Some(bytes) = call.tree_text(method, visitor) {
            let started = facts.clock();
            // A body refused here goes the map's way below, which notes the tables it names
            // before it names its error.
            if let Ok(req) = apijet_request::parse(bytes) {
                facts.parse = started.map(|t| t.elapsed());
                crate::observe::note_tables(
                    &self.metrics,
                    crate::observe::tree_tables(&req),
                    facts,
                );
                return Ok(Prepared {
                    snapshot: self.snapshot(),
                    asked: self.shaped(method, req)?,
                });
            }
        }
        let mut map = match call.body {
            Body::Sent(bytes) => {
                let started = facts.clock();
                let map = parse_body(bytes)?;
                facts.parse = started.map(|t| t.elapsed());
                map
            }
            Body::Object(map) => map,
        };
        if let Some(tag) = call.tag {
            map = wrap_tag(map, tag, method);
        }
        for (k, v) in call.query {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Json::String(v.clone()));
            map.insert(k.clone(), value);
        }
        crate::observe::note_tables(&self.metrics, crate::observe::body_tables(&map), facts);
        check_login_schema(visitor, &map, &self.options)?;
        if !method.is_public() && visitor.is_none() {
            // Every private method needs a login before anything else (§13.2).
            return Err(PlanError::NotLoggedIn.into());
        }
        let snapshot = self.snapshot();
        let asked = match method {
            Method::Crud => {
                let (declared, objects) = crud_parts(map)?;
                // Every part is verified and shaped before anything runs, so a bad part
                // refuses the whole call with nothing written.
                let mut parts = Vec::with_capacity(objects.len());
                for (key, value) in objects {
                    let (method, tag, extra) = declared
                        .iter()
                        .find(|(k, ..)| *k == key)
                        .map(|(_, m, t, e)| (*m, t.clone(), e.clone()))
                        .unwrap_or((Method::Get, key.clone(), Map::new()));
                    let mut body = extra;
                    body.insert("tag".into(), Json::String(tag));
                    body.insert(key.clone(), value);
                    parts.push((key, self.asked(method, body, &snapshot, visitor)?));
                }
                Asked::Crud(parts)
            }
            method => self.asked(method, map, &snapshot, visitor)?,
        };
        Ok(Prepared { snapshot, asked })
    }

    /// Prepares a write the server makes itself (an account endpoint, a sign-up): the caller
    /// made the checks, and `checks` are the structure's.
    pub fn prepare_trusted(
        &self,
        method: Method,
        body: Map<String, Json>,
        checks: Vec<ExistenceCheck>,
    ) -> Result<Prepared, ApiError> {
        Ok(Prepared {
            snapshot: self.snapshot(),
            asked: Asked::Write(Writing {
                method,
                req: Request::from_map(body)?,
                checks,
                trusted: true,
            }),
        })
    }

    /// Verifies a write the server makes for a visitor without a login (a sign-up) by its
    /// `Request` structure, read as a whitelist: nothing else bounds it. The caller may finish
    /// the verified request (seal its passwords) before it writes it with
    /// [`Pipeline::trusted_write`].
    pub fn verify_trusted(
        &self,
        method: Method,
        body: Map<String, Json>,
    ) -> Result<Verified, ApiError> {
        let snapshot = self.snapshot();
        Ok(verify(body, &self.context(method, None, &snapshot, true))?)
    }

    /// What `body` asks as `method`: verified by its `Request` structure unless the method is
    /// public, parsed, and for a read its values in slots.
    fn asked(
        &self,
        method: Method,
        body: Map<String, Json>,
        snapshot: &Snapshot,
        visitor: Option<&Visitor>,
    ) -> Result<Asked, ApiError> {
        let context = self.context(method, visitor, snapshot, false);
        if method.is_query() {
            let body = if method.is_public() {
                body
            } else {
                verify(body, &context)?.request
            };
            return self.shaped(method, Request::from_map(body)?);
        }
        let verified = verify(body, &context)?;
        Ok(Asked::Write(Writing {
            method,
            req: Request::from_map(verified.request)?,
            checks: verified.checks,
            trusted: false,
        }))
    }
}

impl Pipeline {
    /// A read with its condition values taken out into slots.
    fn shaped(&self, method: Method, mut req: Request) -> Result<Asked, ApiError> {
        let values = take_values(&mut req, &self.options.expr)?;
        Ok(Asked::Read(Shaped {
            method,
            req,
            values,
        }))
    }
}

impl Call<'_> {
    /// The body's text, when it can be read straight into the request tree with no JSON map
    /// in between: a GET or HEAD (nothing verifies it, and verification reads a map) sent as
    /// text, with no tag shortcut or URL parameters to merge into it, by a visitor whose login
    /// does not name a schema this server does not serve (whose check reads the map's keys).
    fn tree_text(&self, method: Method, visitor: Option<&Visitor>) -> Option<&[u8]> {
        let Body::Sent(bytes) = self.body else {
            return None;
        };
        let plain = method.is_public() && self.tag.is_none() && self.query.is_empty();
        (plain && visitor.is_none_or(|v| v.foreign_schema.is_none())).then_some(bytes)
    }
}

/// A login whose `defaults` named a schema this server does not serve: the reference reads
/// that schema for every request of the login without a `@schema` of its own, so such a
/// request is refused, naming it, rather than answered from another schema.
fn check_login_schema(
    visitor: Option<&Visitor>,
    map: &Map<String, Json>,
    options: &PlanOptions,
) -> Result<(), PlanError> {
    let Some(schema) = visitor.and_then(|v| v.foreign_schema.as_deref()) else {
        return Ok(());
    };
    if map.contains_key("@schema") {
        return Ok(());
    }
    Err(PlanError::Invalid(format!(
        "this login's defaults name @schema:\"{schema}\", which this server does not serve (it \
         serves {}): log in again with defaults.@schema naming it, or without it, or give the \
         request its own @schema",
        options.served.schemas.join(" / ")
    )))
}

/// The tag shortcut `/{method}/{tag}` (§1.3): the body is the content of the tag.
fn wrap_tag(body: Map<String, Json>, tag: &str, method: Method) -> Map<String, Json> {
    let mut out = Map::new();
    if body.contains_key(tag) || tag.ends_with(":[]") {
        out = body;
    } else if is_table_key(tag) {
        out.insert(tag.to_string(), Json::Object(body));
    } else if let Some(table) = tag.strip_suffix("[]").filter(|t| is_table_key(t)) {
        let key = if matches!(method, Method::Get | Method::Gets) {
            tag
        } else {
            table
        };
        out.insert(key.to_string(), Json::Object(body));
    } else {
        out = body;
    }
    out.insert("tag".into(), Json::String(tag.to_string()));
    out
}
