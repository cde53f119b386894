//! The protocol notes an agent needs to write APIJSON requests (the `apijet://notes`
//! resource), with examples drawn from the tables and columns this visitor may read; and the
//! prompt that turns a question into a request.

use super::describe::Describe;
use apijet_core::Method;
use apijet_plan::schema::{ColumnKind, Table};
use std::fmt::Write as _;

/// The URI of the notes.
pub(crate) const NOTES_URI: &str = "apijet://notes";
/// The prompt's name.
pub(crate) const PROMPT: &str = "apijson_request";

/// Tables and columns the examples are written with: real ones where the schema has them.
struct Sample {
    /// A table the visitor may read with `get`, and its id column.
    table: String,
    id: String,
    /// A text column of it (for `$` and `~`).
    text: String,
    /// A table that refers to another: `child.key` holds `parent.id` (`Moment.userId` →
    /// `User.id`).
    child: String,
    key: String,
    parent: String,
}

impl Sample {
    fn of(tables: &[&Table]) -> Sample {
        let readable: Vec<&Table> = tables
            .iter()
            .copied()
            .filter(|t| !t.roles(Method::Get).is_empty())
            .collect();
        let reference = readable.iter().find_map(|child| {
            child.columns.iter().find_map(|c| {
                let stem = c.name.strip_suffix("Id").filter(|s| !s.is_empty())?;
                let parent = readable.iter().find(|p| {
                    p.api_name.eq_ignore_ascii_case(stem)
                        && p.api_name != child.api_name
                        && p.column("id").is_some()
                })?;
                Some((
                    child.api_name.clone(),
                    c.name.clone(),
                    parent.api_name.clone(),
                ))
            })
        });
        let first = readable
            .iter()
            .find(|t| t.column("id").is_some())
            .or(readable.first());
        let (child, key, parent) = reference.unwrap_or_else(|| {
            let t = first.map_or("Moment".to_string(), |t| t.api_name.clone());
            (t, "userId".into(), "User".into())
        });
        let table = readable
            .iter()
            .find(|t| t.api_name == child)
            .or(first)
            .copied();
        let id = table
            .and_then(|t| t.column("id").or(t.columns.first()))
            .map_or("id".to_string(), |c| c.name.clone());
        let text = table
            .and_then(|t| {
                t.columns
                    .iter()
                    .find(|c| c.kind == ColumnKind::Text && !c.name.starts_with('_'))
            })
            .map_or("content".to_string(), |c| c.name.clone());
        Sample {
            table: table.map_or(child.clone(), |t| t.api_name.clone()),
            id,
            text,
            child,
            key,
            parent,
        }
    }
}

/// The notes, as Markdown, for this visitor.
pub(crate) fn notes(d: &Describe<'_>) -> String {
    let tables = d.tables();
    let s = Sample::of(&tables);
    let (t, id, text) = (&s.table, &s.id, &s.text);
    let (child, key, parent) = (&s.child, &s.key, &s.parent);
    let max_count = d.options.max_count;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"# Writing APIJSON requests for apijet

A request is one JSON object; the answer has the same shape, with "ok", "code", "msg" and
"time" added. Call the tool named after the method with the request as its `request`
argument: `get` and `head` (count) are public; `gets`, `heads`, `post`, `put`, `delete` need
a login and a "tag" naming a Request structure (the `describe` tool lists the tables, columns
and structures you may use). A refusal is a tool error whose text holds the APIJSON "code"
and "msg": read it, fix the request, and call again.

## Objects
- `{{"{t}":{{"{id}":1}}}}` reads one row of {t} (the first that matches). Keys inside a table
  object are conditions on its columns; no row: the key is left out of the answer.
- `"@column":"{id},{text}"` picks columns (`"{id}:ident"` renames); `"@order":"{id}-"` sorts
  (`+` ascending, `-` descending, comma-separated).
- Several table objects in one request are read in turn; later ones may refer to earlier ones.

## Lists and paging
- `{{"{t}[]":{{"count":5,"{t}":{{"@order":"{id}-"}}}}}}` answers a list of rows (`Table[]`
  unwraps them); `{{"{t}-{id}[]":{{"count":5,"{t}":{{}}}}}}` one column as a list.
- `{{"[]":{{"count":5,"page":1,"{child}":{{}},"{parent}":{{"id@":"/{child}/{key}"}}}}}}` answers
  items that each hold one {child} row and the {parent} row it refers to.
- `count`: rows per page (default 10, at most {max_count}; 0 means {max_count}); `page`: 0-based page
  number. Add `"query":2` in the list and `"total@":"/{t}[]/total"` at the root to get the
  total number of rows as well.
- A long answer is cut to fit your context: the tool then says which list was cut and the
  `count`/`page` to ask for the rest.

## Conditions (keys inside a table object)
- `"{id}":1` equals; `"{id}!":1` not equal; `"{id}>":1`, `">="`, `"<"`, `"<="` compare.
- `"{id}{{}}":[1,2,3]` is IN a list; `"{id}!{{}}":[…]` NOT IN.
- `"{id}{{}}":"<10,>=100"` joins its parts with OR; `"{id}&{{}}":">1,<=10"` with AND.
- `"{text}$":"%word%"` is LIKE (case-insensitive); `"{text}~":"^[A-Z]"` a regular expression.
- `"key<>":1` is JSON array containment (the column holds 1).
- `"key{{}}":"=null"` is IS NULL, `"key{{}}":"!=null"` IS NOT NULL; a JSON null value is
  ignored.
- Conditions are joined with AND; `"@combine":"{id}{{}} | {text}$"` joins the named condition
  keys as written (`|` OR, `&` AND, `!` NOT, parentheses).

## References
- `"{key}@":"/{parent}/id"` takes a value from an object answered before (absolute path from
  the root); `"id@":"/{child}/{key}"` inside a list item refers to the same item. A reference
  to a row that is not there leaves the object out.

## Aggregates and expressions
- `"@column":"{key};count(*):n","@group":"{key}","@having":"count(*)>1"` groups; functions
  of SQL (`count`, `sum`, `avg`, `max`, `min`, `length`, `concat`, …) are parsed, never spliced.
- `head` answers `{{"{t}":{{"count":N}}}}` for the same conditions as `get`.

## Private reads and writes
- `{{"tag":"Privacy","Privacy":{{"id":YOUR_ID}}}}` through `gets`: the tag names the structure
  (`describe` lists them under "requests", with what each is for); it decides which keys are
  required or refused.
- `post` inserts (`{{"tag":"{child}","{child}":{{…columns…}}}}`, answers the new id); `put`
  updates by `id` or `id{{}}` (`"k+"` / `"k-"` add to or remove from a number, text or JSON
  array); `delete` deletes by `id` or `id{{}}`. One request is one transaction.

## Codes
200 success; 400 not JSON; 401 no such table or not allowed for your role; 403 a Request
structure forbids it; 404 not found; 406 a key or value is wrong (the message names it);
407 needs a login; 408 too slow; 409 conflict; 412 a check failed; 413 too large;
429 too many at once; 500 server fault.
"#
    );
    if tables.is_empty() {
        out.push_str("\nNo table is served to you at the moment.\n");
    } else {
        out.push_str("\n## Tables you may use\n");
        for table in &tables {
            let columns: Vec<&str> = table
                .columns
                .iter()
                .map(|c| c.name.as_str())
                .filter(|n| !n.starts_with('_'))
                .collect();
            let _ = writeln!(out, "- {}: {}", table.api_name, columns.join(", "));
        }
    }
    out
}

/// The prompt's text: the question, what the visitor may read, and how to answer it.
pub(crate) fn prompt(d: &Describe<'_>, question: &str) -> String {
    let tables = d.tables();
    let s = Sample::of(&tables);
    let mut out = String::from(
        "Answer the question below from the apijet server's data. Write one APIJSON request \
         (read the apijet://notes resource for the grammar), call the get tool with it (head \
         to count; gets with a \"tag\" for private data), fix the request from the tool's \
         error message if it is refused, and answer from the result. Ask only for the columns \
         you need, and page long lists with count and page.\n\nTables and columns you may \
         read:\n",
    );
    for table in tables.iter().filter(|t| !t.roles(Method::Get).is_empty()) {
        let columns: Vec<&str> = table
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .filter(|n| !n.starts_with('_'))
            .collect();
        let _ = writeln!(out, "- {}: {}", table.api_name, columns.join(", "));
    }
    let _ = write!(
        out,
        "\nFor example, the 3 newest {child} rows with their {parent}: \
         {{\"[]\":{{\"count\":3,\"{child}\":{{\"@order\":\"id-\"}},\"{parent}\":{{\"id@\":\"/{child}/{key}\"}}}}}}\n\n\
         Question: {question}\n",
        child = s.child,
        parent = s.parent,
        key = s.key
    );
    out
}
