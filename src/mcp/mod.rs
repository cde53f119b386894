//! apijet for AI agents: a Model Context Protocol server (the official Rust SDK, `rmcp`) over
//! Streamable HTTP at `/mcp` on the API's own listener ([`http`]) and over stdio
//! (`apijet mcp`, [`stdio`]).
//!
//! It adds no reach of its own. Each APIJSON method is a tool, named as the method, whose one
//! argument is the request object; every such call goes through [`call::call`] into the
//! application's request entry, as the visitor whose token the agent carries (a bearer token
//! on HTTP, a token or phone and password given at start on stdio; none: not logged in, so no
//! write is reachable). `describe` ([`describe`]) says what that visitor may use; the
//! `apijet://notes` resource and the `apijson_request` prompt ([`notes`]) teach the grammar
//! with the tables of this database; answers are cut to `mcp_max_answer_bytes` with paging
//! guidance ([`fit`]).

mod call;
mod describe;
mod details;
mod fit;
pub mod http;
mod notes;
pub mod stdio;
mod tools;

use crate::app::AppState;
use crate::client::ClientKey;
use crate::config::Config;
use apijet_core::Visitor;
use apijet_exec::cancel::Watch;
use call::ToolAnswer;
use describe::Describe;
use details::DetailsCache;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value as Json};
use std::sync::Arc;

/// The MCP settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// Most bytes of one tool answer (`mcp_max_answer_bytes`).
    pub max_answer_bytes: usize,
    /// Largest request object (`max_body_bytes`, as for an HTTP body).
    pub max_body_bytes: usize,
}

impl Settings {
    pub(crate) fn of(cfg: &Config) -> Settings {
        Settings {
            max_answer_bytes: cfg.mcp_max_answer_bytes,
            max_body_bytes: cfg.max_body_bytes,
        }
    }
}

/// Who calls, as the request entry needs it: the visitor, the client (the ledger counts its
/// work by it), and the watch of the HTTP request that carried the call (which
/// stops statements when its client leaves).
#[derive(Clone, Default)]
pub(crate) struct Caller {
    pub visitor: Option<Visitor>,
    pub client: Option<ClientKey>,
    pub watch: Watch,
}

/// The MCP server of one application state; cheap to clone (one per HTTP request).
#[derive(Clone)]
pub struct Mcp {
    inner: Arc<Inner>,
}

struct Inner {
    state: Arc<AppState>,
    settings: Settings,
    details: DetailsCache,
    /// The login of a stdio server (none on HTTP, where each request carries its own).
    login: Option<stdio::Login>,
}

impl Mcp {
    pub(crate) fn new(
        state: Arc<AppState>,
        settings: Settings,
        login: Option<stdio::Login>,
    ) -> Mcp {
        Mcp {
            inner: Arc::new(Inner {
                state,
                settings,
                details: DetailsCache::default(),
                login,
            }),
        }
    }

    /// Who sent this request: the stdio server's login, or what the `/mcp` route put beside
    /// the HTTP request ([`http`]). A stdio login that expired and cannot be renewed is a
    /// refusal.
    async fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, ToolAnswer> {
        if let Some(login) = &self.inner.login {
            return login.caller(&self.inner.state).await;
        }
        Ok(context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .unwrap_or_default())
    }

    async fn run_describe(
        &self,
        caller: &Caller,
        arguments: Option<&Map<String, Json>>,
    ) -> ToolAnswer {
        let only: Option<Vec<String>> = match arguments.and_then(|a| a.get("tables")) {
            None | Some(Json::Null) => None,
            Some(names) => match serde_json::from_value(names.clone()) {
                Ok(names) => Some(names),
                Err(_) => return ToolAnswer::refused(400, "tables must be a list of table names"),
            },
        };
        let answer = self
            .with_describe(caller.visitor.as_ref(), |d| d.answer(only.as_deref()))
            .await;
        ToolAnswer::sized(
            &apijet_response::success(answer, false),
            self.inner.settings.max_answer_bytes,
            fit::Guide::Describe,
        )
    }

    fn result(answer: ToolAnswer) -> CallToolResponse {
        let content = answer.texts.into_iter().map(ContentBlock::text).collect();
        if answer.is_error {
            CallToolResult::error(content).into()
        } else {
            CallToolResult::success(content).into()
        }
    }
}

impl ServerHandler for Mcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .build();
        let mut info = ServerConfig::new(capabilities).with_instructions(
            "apijet serves an APIJSON database. Call describe to see the tables, columns and \
             Request structures you may use; read the apijet://notes resource for the request \
             grammar; then call get (or head, gets, heads, post, put, delete) with the APIJSON \
             request object as the request argument. A refused call is a tool error with the \
             APIJSON code and message: fix the request and call again. Long answers are cut \
             with count/page guidance.",
        );
        info.server_info = Implementation::new("apijet", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let logged_in = self
            .caller(&context)
            .await
            .is_ok_and(|c| c.visitor.is_some());
        // What a visitor sees depends on who asks: never shared, never kept.
        Ok(ListToolsResult::with_all_items(tools::listed(logged_in))
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::definition(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        if name != tools::DESCRIBE && !tools::is_method(name) {
            return Err(McpError::invalid_params(
                format!("no tool {name}: the tools are describe, get, head, gets, heads, post, put, delete"),
                None,
            ));
        }
        let caller = match self.caller(&context).await {
            Ok(c) => c,
            Err(refused) => return Ok(Mcp::result(refused)),
        };
        let arguments = request.arguments.as_ref();
        let answer = if name == tools::DESCRIBE {
            self.run_describe(&caller, arguments).await
        } else {
            match call::request_argument(arguments) {
                Ok(req) => {
                    call::call(
                        &self.inner.state,
                        &self.inner.settings,
                        name,
                        req,
                        &caller,
                        &context.ct,
                    )
                    .await
                }
                Err(msg) => ToolAnswer::refused(400, &msg),
            }
        };
        Ok(Mcp::result(answer))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let notes = Resource::new(notes::NOTES_URI, "notes")
            .with_title("Writing APIJSON requests for apijet")
            .with_description(
                "The request grammar (objects, lists, conditions and operators, references, \
                 paging, private requests, codes) with examples from this database's tables",
            )
            .with_mime_type("text/markdown");
        Ok(ListResourcesResult::with_all_items(vec![notes])
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if request.uri != notes::NOTES_URI {
            return Err(McpError::resource_not_found(
                format!(
                    "no resource {}: the one resource is {}",
                    request.uri,
                    notes::NOTES_URI
                ),
                None,
            ));
        }
        let visitor = self.caller(&context).await.ok().and_then(|c| c.visitor);
        let text = self.with_describe(visitor.as_ref(), notes::notes).await;
        let contents =
            ResourceContents::text(text, notes::NOTES_URI).with_mime_type("text/markdown");
        Ok(ReadResourceResult::new(vec![contents])
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private)
            .into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let prompt = Prompt::new(
            notes::PROMPT,
            Some(
                "Turn a question about this database into an APIJSON request, run it with the \
                 get tool and answer from its result",
            ),
            Some(vec![PromptArgument::new("question")
                .with_description("What to find out, in plain words")
                .with_required(true)]),
        );
        Ok(ListPromptsResult::with_all_items(vec![prompt])
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if request.name != notes::PROMPT {
            return Err(McpError::invalid_params(
                format!(
                    "no prompt {}: the one prompt is {}",
                    request.name,
                    notes::PROMPT
                ),
                None,
            ));
        }
        let question = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("question"))
            .and_then(Json::as_str)
            .filter(|q| !q.trim().is_empty())
            .ok_or_else(|| McpError::invalid_params("the argument question is required", None))?
            .to_string();
        let visitor = self.caller(&context).await.ok().and_then(|c| c.visitor);
        let text = self
            .with_describe(visitor.as_ref(), |d| notes::prompt(d, &question))
            .await;
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description("An APIJSON request for the question, answered with the get tool")
                .into(),
        )
    }
}

impl Mcp {
    /// `make` with a [`Describe`] of the current snapshot for `visitor`.
    async fn with_describe<T>(
        &self,
        visitor: Option<&Visitor>,
        make: impl FnOnce(&Describe<'_>) -> T,
    ) -> T {
        let pipeline = &self.inner.state.pipeline;
        let snapshot = pipeline.snapshot();
        let details = self.inner.details.of(pipeline, &snapshot).await;
        make(&Describe {
            snapshot: &snapshot,
            details: &details,
            options: &pipeline.options,
            visitor,
            max_answer_bytes: self.inner.settings.max_answer_bytes,
        })
    }
}
