//! What a write did, member by member, for `response` to answer: the rows each written object
//! changed, the ids it answers, the statements of its `@explain` and the results of the
//! functions run after it.

use serde_json::Value as Json;

/// The ids a written object answers.
#[derive(Debug, Clone, PartialEq)]
pub enum WrittenIds {
    /// `id`: the object's row.
    One(Json),
    /// `id[]`: a batch's rows, or the rows `id{}` named.
    List(Vec<Json>),
}

/// One written object.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Written {
    /// `@explain`: the statements it ran.
    pub sql: Option<String>,
    /// The rows it changed.
    pub count: u64,
    /// The ids it answers.
    pub ids: Option<WrittenIds>,
    /// The results of the functions run after it, in request order (`"k()"`).
    pub results: Vec<(String, Json)>,
}

/// A member of a write's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum WrittenMember {
    /// A table object or batch that was written.
    Object(Written),
    /// A value answered as sent.
    Value(Json),
}

/// A write's answer, its members in request order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WriteOutcome {
    /// The members by answer key.
    pub members: Vec<(String, WrittenMember)>,
}
