//! Classifying a body's keys into the request tree: the one classification, for both sources.
//!
//! The body's text is read straight into the tree (no map of keys, no intermediate value for
//! an object that becomes a node); an object already parsed (a `/router` template, a verified
//! write, a tag shortcut) is read through `serde_json::Value`'s own deserializer. Both are serde
//! deserializers, so the visitors below are the whole classification: a key is classified by
//! its spelling before its value is read, and its node built by the value's JSON type.
//!
//! Text that repeats a key in one object, or has an object with more than [`DIRECT_KEYS`] keys,
//! or does not parse, is read through a map instead ([`Stop::Map`]): the map keeps serde_json's
//! semantics for a repeated key (the last value, at the first one's place) and names the error.

use crate::key::{ArrayKey, ConditionKey, TableKey};
use crate::tree::{
    ArrayObject, Container, Member, Node, Request, SubqueryObject, TableEntry, TableObject,
};
use crate::RequestError;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt;

/// The most keys one object may have to be read straight from the text: past it, the check
/// for repeated keys would cost more than the map it replaces.
const DIRECT_KEYS: usize = 16;

/// The deepest object read straight from the text: requests nest a few levels, and each level
/// read this way costs more stack than a level of a map, which serde_json bounds (128 levels,
/// its error) before anything is classified.
const DIRECT_DEPTH: usize = 24;

/// Why the classification stopped, besides its deserializer's own errors.
enum Stop {
    /// A key broke the grammar.
    Key(RequestError),
    /// The text must be read through a map.
    Map,
}

/// What every visitor shares.
struct Cx {
    /// Set when a visitor stops the deserializer.
    stop: Option<Stop>,
    /// Reading text straight into the tree (repeated keys are checked for).
    direct: bool,
    /// Objects being built around the current one.
    depth: usize,
}

impl Cx {
    fn fail<E: de::Error>(&mut self, stop: Stop) -> E {
        self.stop = Some(stop);
        E::custom("the request tree stopped")
    }
}

/// Reads body text straight into a request tree; `None` when it must be read through a map.
pub(crate) fn from_text(text: &str) -> Option<Request> {
    direct(serde_json::Deserializer::from_str(text))
}

/// [`from_text`] of bytes without comments.
pub(crate) fn from_slice(bytes: &[u8]) -> Option<Request> {
    direct(serde_json::Deserializer::from_slice(bytes))
}

fn direct<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
) -> Option<Request> {
    let mut cx = Cx {
        stop: None,
        direct: true,
        depth: 0,
    };
    let req = RootSeed { cx: &mut cx }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(req)
}

/// Classifies the keys of an object already parsed.
pub(crate) fn from_map(map: Map<String, Value>) -> Result<Request, RequestError> {
    let mut cx = Cx {
        stop: None,
        direct: false,
        depth: 0,
    };
    let got = RootSeed { cx: &mut cx }.deserialize(Value::Object(map));
    got.map_err(|e| stopped(cx, e))
}

/// Classifies the keys of a table object already parsed.
pub(crate) fn table_from_map(
    key: TableKey,
    map: Map<String, Value>,
) -> Result<TableObject, RequestError> {
    let mut cx = Cx {
        stop: None,
        direct: false,
        depth: 0,
    };
    let got = de::Deserializer::deserialize_map(
        Value::Object(map),
        ValueVisitor {
            build: Build::Table(key),
            cx: &mut cx,
        },
    );
    match got {
        Ok(Got::Built(Built::Table(t))) => Ok(t),
        Ok(_) => Err(RequestError::NotAnObject),
        Err(e) => Err(stopped(cx, e)),
    }
}

fn stopped(cx: Cx, e: serde_json::Error) -> RequestError {
    match cx.stop {
        Some(Stop::Key(e)) => e,
        _ => RequestError::InvalidJson(e.to_string()),
    }
}

/// The keys of one object seen so far, by hash, when reading text: a repeat (or a hash
/// collision, which costs only the map) sends the text through a map.
struct Seen {
    hashes: [u64; DIRECT_KEYS],
    len: usize,
}

impl Seen {
    fn new() -> Seen {
        Seen {
            hashes: [0; DIRECT_KEYS],
            len: 0,
        }
    }

    fn note<E: de::Error>(&mut self, key: &str, cx: &mut Cx) -> Result<(), E> {
        if !cx.direct {
            return Ok(());
        }
        // FNV-1a: keys are short, and a collision only costs the map.
        let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        if self.len == DIRECT_KEYS || self.hashes[..self.len].contains(&hash) {
            return Err(cx.fail(Stop::Map));
        }
        self.hashes[self.len] = hash;
        self.len += 1;
        Ok(())
    }
}

/// A key, borrowed from the text where it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// What an object under a key is built into, decided by the key alone.
enum Build {
    /// A value, as sent.
    Value,
    /// A table object.
    Table(TableKey),
    /// An array object.
    Array(ArrayKey),
    /// A subquery object.
    Subquery,
}

/// A member's value: JSON `null` (skipped wherever the reference parses an object:
/// AbstractObjectParser's `if (value == null) continue;`), an object built as its key asked,
/// or any other value.
enum Got {
    Null,
    Built(Built),
    Other(Value),
}

/// Boxed as the tree keeps them: a level of nesting costs the stack no more than it must.
enum Built {
    Table(TableObject),
    Array(Box<ArrayObject>),
    Subquery(Box<SubqueryObject>),
}

/// A member's value, built as `build` says when it is an object.
struct ValueSeed<'c> {
    build: Build,
    cx: &'c mut Cx,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Got;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Got, D::Error> {
        if matches!(self.build, Build::Value) {
            return Ok(match Value::deserialize(d)? {
                Value::Null => Got::Null,
                v => Got::Other(v),
            });
        }
        if self.cx.direct && self.cx.depth == DIRECT_DEPTH {
            return Err(self.cx.fail(Stop::Map));
        }
        self.cx.depth += 1;
        let got = d.deserialize_any(ValueVisitor {
            build: self.build,
            cx: &mut *self.cx,
        });
        self.cx.depth -= 1;
        got
    }
}

struct ValueVisitor<'c> {
    build: Build,
    cx: &'c mut Cx,
}

impl<'de> Visitor<'de> for ValueVisitor<'_> {
    type Value = Got;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Got, A::Error> {
        Ok(match self.build {
            Build::Table(key) => Got::Built(Built::Table(table(key, map, self.cx)?)),
            Build::Array(key) => Got::Built(Built::Array(array(key, map, self.cx)?)),
            Build::Subquery => Got::Built(Built::Subquery(subquery(map, self.cx)?)),
            Build::Value => Got::Other(Value::deserialize(de::value::MapAccessDeserializer::new(
                map,
            ))?),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Got, A::Error> {
        let v = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        Ok(Got::Other(v))
    }

    fn visit_unit<E>(self) -> Result<Got, E> {
        Ok(Got::Null)
    }

    fn visit_none<E>(self) -> Result<Got, E> {
        Ok(Got::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Got, E> {
        Ok(Got::Other(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Got, E> {
        Ok(Got::Other(Value::Number(v.into())))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Got, E> {
        Ok(Got::Other(Value::Number(v.into())))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Got, E> {
        // As serde_json's own value visitor reads a number.
        Ok(Got::Other(
            Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }

    fn visit_str<E>(self, v: &str) -> Result<Got, E> {
        Ok(Got::Other(Value::String(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Got, E> {
        Ok(Got::Other(Value::String(v)))
    }
}

/// Reads the next member's value.
fn next<'de, A: MapAccess<'de>>(map: &mut A, build: Build, cx: &mut Cx) -> Result<Got, A::Error> {
    map.next_value_seed(ValueSeed { build, cx })
}

/// Reads a value whose JSON type decides nothing; `None` for `null`.
fn next_value<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Value>, A::Error> {
    Ok(Some(map.next_value::<Value>()?).filter(|v| !v.is_null()))
}

struct RootSeed<'c> {
    cx: &'c mut Cx,
}

impl<'de> DeserializeSeed<'de> for RootSeed<'_> {
    type Value = Request;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Request, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RootSeed<'_> {
    type Value = Request;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Request, A::Error> {
        let cx = self.cx;
        let mut req = Request::default();
        let mut seen = Seen::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            seen.note(&key, cx)?;
            match &*key {
                "tag" | "version" | "format" => {
                    let Some(v) = next_value(&mut map)? else {
                        continue;
                    };
                    match &*key {
                        "tag" => {
                            req.tag = Some(match v {
                                Value::String(s) => s,
                                other => other.to_string(),
                            })
                        }
                        "version" => req.version = Some(v),
                        _ => req.format = v.as_bool().unwrap_or(false),
                    }
                }
                // A global `@keyword` (not a `key@` reference, not an object).
                k if k.starts_with('@') && !k.ends_with('@') => {
                    match next(&mut map, member_build(k), cx)? {
                        Got::Other(v) if !v.is_object() => {
                            req.globals.push((k[1..].to_string(), v));
                        }
                        got => push_member(&mut req.root, key, got),
                    }
                }
                k => {
                    let got = next(&mut map, member_build(k), cx)?;
                    push_member(&mut req.root, key, got);
                }
            }
        }
        Ok(req)
    }
}

/// What the object under a member of a container (the root, an array's or a subquery's
/// items) is built into.
fn member_build(key: &str) -> Build {
    if key.ends_with("()") {
        Build::Value
    } else if key.ends_with('@') {
        Build::Subquery
    } else if let Some(ak) = ArrayKey::parse(key) {
        Build::Array(ak)
    } else if let Some(tk) = TableKey::parse(key) {
        Build::Table(tk)
    } else {
        Build::Value
    }
}

/// Adds a member to a container, unless it asks for nothing.
fn push_member(c: &mut Container, key: Cow<'_, str>, got: Got) {
    if let Some(node) = member_node(&key, got) {
        c.members.push(Member {
            key: key.into_owned(),
            node,
        });
    }
}

/// A container member's node; `None` for `null` and an array with nothing to list
/// (`"[]": {"count": 5, "page": 3}`, as APIAuto's random configs write them), which the
/// reference skips: no key in the answer, and no first-child rule.
fn member_node(key: &str, got: Got) -> Option<Node> {
    Some(match got {
        Got::Null => return None,
        Got::Built(Built::Table(t)) => Node::Table(t),
        Got::Built(Built::Array(a)) if a.items.members.is_empty() => return None,
        Got::Built(Built::Array(a)) => Node::Array(a),
        Got::Built(Built::Subquery(sq)) => Node::Subquery(sq),
        Got::Other(v) if key.ends_with("()") => Node::Function(value_text(v)),
        Got::Other(v) if key.ends_with('@') => Node::Reference(value_text(v)),
        Got::Other(v) => Node::Value(v),
    })
}

fn value_text(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

fn array<'de, A: MapAccess<'de>>(
    key: ArrayKey,
    map: A,
    cx: &mut Cx,
) -> Result<Box<ArrayObject>, A::Error> {
    let arr = Box::new(ArrayObject {
        key,
        count: None,
        page: None,
        query: None,
        compat: None,
        join: None,
        items: Container::default(),
    });
    members(arr, map, cx)
}

fn subquery<'de, A: MapAccess<'de>>(map: A, cx: &mut Cx) -> Result<Box<SubqueryObject>, A::Error> {
    let sq = Box::new(SubqueryObject {
        from: None,
        range: None,
        count: None,
        page: None,
        join: None,
        with: None,
        items: Container::default(),
    });
    members(sq, map, cx)
}

/// An object of named fields and a container of the rest: an array's or a subquery's.
trait Fields {
    /// The fields' names.
    const NAMES: &'static [&'static str];
    /// Sets the field named `NAMES[i]`.
    fn set(&mut self, i: usize, value: Value);
    /// The container of the other members.
    fn items(&mut self) -> &mut Container;
}

impl Fields for ArrayObject {
    const NAMES: &'static [&'static str] = &["count", "page", "query", "compat", "join"];

    fn set(&mut self, i: usize, value: Value) {
        let field = [
            &mut self.count,
            &mut self.page,
            &mut self.query,
            &mut self.compat,
            &mut self.join,
        ];
        if let Some(field) = field.into_iter().nth(i) {
            *field = Some(value);
        }
    }

    fn items(&mut self) -> &mut Container {
        &mut self.items
    }
}

impl Fields for SubqueryObject {
    const NAMES: &'static [&'static str] = &["from", "with", "range", "count", "page", "join"];

    fn set(&mut self, i: usize, value: Value) {
        if i == 0 {
            self.from = Some(value_text(value));
            return;
        }
        let field = [
            &mut self.with,
            &mut self.range,
            &mut self.count,
            &mut self.page,
            &mut self.join,
        ];
        if let Some(field) = field.into_iter().nth(i - 1) {
            *field = Some(value);
        }
    }

    fn items(&mut self) -> &mut Container {
        &mut self.items
    }
}

/// Reads the members of an array's or a subquery's object into it; boxed, as the tree keeps
/// it, so that a level of nesting costs the stack no more than it must.
fn members<'de, T: Fields, A: MapAccess<'de>>(
    mut obj: Box<T>,
    mut map: A,
    cx: &mut Cx,
) -> Result<Box<T>, A::Error> {
    let mut seen = Seen::new();
    while let Some(k) = map.next_key_seed(KeySeed)? {
        seen.note(&k, cx)?;
        match T::NAMES.iter().position(|f| *f == k) {
            Some(i) => {
                if let Some(v) = next_value(&mut map)? {
                    obj.set(i, v);
                }
            }
            None => {
                let got = next(&mut map, member_build(&k), cx)?;
                push_member(obj.items(), k, got);
            }
        }
    }
    Ok(obj)
}

fn table<'de, A: MapAccess<'de>>(
    key: TableKey,
    mut map: A,
    cx: &mut Cx,
) -> Result<TableObject, A::Error> {
    let mut entries = Vec::new();
    let mut seen = Seen::new();
    while let Some(k) = map.next_key_seed(KeySeed)? {
        seen.note(&k, cx)?;
        let entry = if k == "@from@" {
            match next(&mut map, Build::Subquery, cx)? {
                Got::Built(Built::Subquery(sq)) => TableEntry::FromSubquery(sq),
                Got::Other(value) => TableEntry::Keyword {
                    name: "from@".into(),
                    value,
                },
                // A subquery is all an object under `@from@` is built into.
                Got::Null | Got::Built(_) => continue,
            }
        } else if let Some(name) = k.strip_prefix('@') {
            let Some(value) = next_value(&mut map)? else {
                continue;
            };
            TableEntry::Keyword {
                name: name.to_string(),
                value,
            }
        } else if k.ends_with("()") {
            let Some(v) = next_value(&mut map)? else {
                continue;
            };
            TableEntry::Function {
                key: k.into_owned(),
                call: value_text(v),
            }
        } else {
            // A nested table or array when its value is an object, else a condition: the
            // key is read as one before its value, so that a bad key is named before
            // anything inside its value.
            let child = ArrayKey::parse(&k)
                .map(Build::Array)
                .or_else(|| TableKey::parse(&k).map(Build::Table));
            let ck = match child {
                Some(_) => None,
                None => Some(ConditionKey::parse(&k)),
            };
            let build = match (child, &ck) {
                (Some(build), _) => build,
                (None, Some(Ok(c))) if c.reference => Build::Subquery,
                _ => Build::Value,
            };
            let got = next(&mut map, build, cx)?;
            if matches!(got, Got::Null) {
                continue;
            }
            if let Got::Built(built @ (Built::Table(_) | Built::Array(_))) = got {
                let Some(node) = member_node(&k, Got::Built(built)) else {
                    continue;
                };
                entries.push(TableEntry::Child(Box::new(Member {
                    key: k.into_owned(),
                    node,
                })));
                continue;
            }
            let ck = match ck.unwrap_or_else(|| ConditionKey::parse(&k)) {
                Ok(ck) => ck,
                Err(e) => return Err(cx.fail(Stop::Key(e))),
            };
            match got {
                Got::Built(Built::Subquery(sq)) => TableEntry::SubqueryCondition {
                    key: ck,
                    subquery: sq,
                },
                Got::Other(v) if ck.reference => TableEntry::RefCondition {
                    key: ck,
                    path: value_text(v),
                },
                Got::Other(v) if v.is_object() => TableEntry::Echo {
                    key: k.into_owned(),
                    value: v,
                },
                Got::Other(value) => TableEntry::Condition { key: ck, value },
                Got::Null | Got::Built(_) => continue,
            }
        };
        entries.push(entry);
    }
    Ok(TableObject { key, entries })
}

impl Request {
    /// Classifies every key of a parsed body.
    pub fn from_map(map: Map<String, Value>) -> Result<Request, RequestError> {
        from_map(map)
    }
}

impl TableObject {
    /// Classifies the keys of a table object given on its own (e.g. the ON object of `join`'s
    /// object form, planned on the joined table).
    pub fn from_map(key: TableKey, map: Map<String, Value>) -> Result<TableObject, RequestError> {
        table_from_map(key, map)
    }
}
