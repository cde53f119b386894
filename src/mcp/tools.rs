//! The tools: `describe`, and one per APIJSON method, named as the method, each taking the
//! request object as its one argument. The write methods are listed only to a logged-in
//! visitor; called without a login they answer what `/post` answers then (407).

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// The tool that describes what this visitor may use.
pub(crate) const DESCRIBE: &str = "describe";

/// One APIJSON method as a tool.
struct MethodTool {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    /// Listed only to a logged-in visitor.
    needs_login: bool,
    read_only: bool,
    destructive: bool,
}

const METHODS: [MethodTool; 7] = [
    MethodTool {
        name: "get",
        title: "Read (GET)",
        description: "Reads data: the APIJSON request object in, the answer in the same shape \
             out. {\"User\":{\"id\":82001}} is one object; {\"Moment[]\":{\"count\":5,\"Moment\":\
             {\"userId\":82001}}} a list; {\"[]\":{\"Moment\":{},\"User\":{\"id@\":\"/Moment/userId\"}}} \
             moments with their authors. Call describe first for the tables and columns you may \
             read, and read the apijet://notes resource for the key grammar (conditions, \
             references, paging).",
        needs_login: false,
        read_only: true,
        destructive: false,
    },
    MethodTool {
        name: "head",
        title: "Count (HEAD)",
        description: "Counts rows: the same request object as get, answered with \
             {\"Table\":{\"count\":N}} per table object.",
        needs_login: false,
        read_only: true,
        destructive: false,
    },
    MethodTool {
        name: "gets",
        title: "Private read (GETS)",
        description: "Reads private data through a Request structure: the request names it \
             with \"tag\" (describe lists the structures you may call), e.g. \
             {\"tag\":\"Privacy\",\"Privacy\":{\"id\":82001}}. Needs a login.",
        needs_login: false,
        read_only: true,
        destructive: false,
    },
    MethodTool {
        name: "heads",
        title: "Private count (HEADS)",
        description: "Counts private rows through a Request structure named by \"tag\", like \
             gets. Needs a login.",
        needs_login: false,
        read_only: true,
        destructive: false,
    },
    MethodTool {
        name: "post",
        title: "Insert (POST)",
        description: "Inserts rows through a Request structure named by \"tag\", e.g. \
             {\"tag\":\"Comment\",\"Comment\":{\"momentId\":1001,\"content\":\"hi\"}}; answers \
             the new id. One request is one transaction.",
        needs_login: true,
        read_only: false,
        destructive: false,
    },
    MethodTool {
        name: "put",
        title: "Update (PUT)",
        description: "Updates rows through a Request structure named by \"tag\", by id or \
             id{}, e.g. {\"tag\":\"Moment\",\"Moment\":{\"id\":1016,\"content\":\"new\"}}; \
             \"k+\" / \"k-\" add to or remove from a number, text or JSON array.",
        needs_login: true,
        read_only: false,
        destructive: true,
    },
    MethodTool {
        name: "delete",
        title: "Delete (DELETE)",
        description: "Deletes rows through a Request structure named by \"tag\", by id or \
             id{}, e.g. {\"tag\":\"Comment\",\"Comment\":{\"id\":5001}}.",
        needs_login: true,
        read_only: false,
        destructive: true,
    },
];

/// Whether `name` is the tool of an APIJSON method.
pub(crate) fn is_method(name: &str) -> bool {
    METHODS.iter().any(|m| m.name == name)
}

fn schema(v: Json) -> Arc<JsonObject> {
    Arc::new(match v {
        Json::Object(m) => m,
        _ => JsonObject::new(),
    })
}

fn describe_tool() -> Tool {
    let mut tool = Tool::default();
    tool.name = DESCRIBE.into();
    tool.title = Some("Describe what you may use".into());
    tool.description = Some(
        "The tables you may use (their columns with types and comments, and the methods and \
         roles the Access table grants you), the Request structures you may call with gets, \
         heads, post, put and delete (by tag), and the functions requests may call with a \
         demo of each. Give tables to describe only those."
            .into(),
    );
    tool.input_schema = schema(json!({
        "type": "object",
        "properties": {
            "tables": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only these tables (default: every table you may use)"
            }
        },
        "additionalProperties": false
    }));
    tool.annotations = Some(
        ToolAnnotations::with_title("Describe")
            .read_only(true)
            .open_world(false),
    );
    tool
}

fn method_tool(m: &MethodTool) -> Tool {
    let mut tool = Tool::default();
    tool.name = m.name.into();
    tool.title = Some(m.title.into());
    tool.description = Some(m.description.into());
    tool.input_schema = schema(json!({
        "type": "object",
        "properties": {
            "request": {
                "type": "object",
                "description": "The APIJSON request object, as the body of POST /{method}",
                "additionalProperties": true
            }
        },
        "required": ["request"],
        "additionalProperties": false
    }));
    let mut annotations = ToolAnnotations::with_title(m.title)
        .read_only(m.read_only)
        .open_world(false);
    if !m.read_only {
        annotations = annotations
            .destructive(m.destructive)
            .idempotent(m.name != "post");
    }
    tool.annotations = Some(annotations);
    tool
}

/// The tools a visitor sees: the writes only when logged in.
pub(crate) fn listed(logged_in: bool) -> Vec<Tool> {
    std::iter::once(describe_tool())
        .chain(
            METHODS
                .iter()
                .filter(|m| logged_in || !m.needs_login)
                .map(method_tool),
        )
        .collect()
}

/// The definition of `name`, whoever asks.
pub(crate) fn definition(name: &str) -> Option<Tool> {
    if name == DESCRIBE {
        return Some(describe_tool());
    }
    METHODS.iter().find(|m| m.name == name).map(method_tool)
}
