//! The MCP face: `loopx mcp`, a Model Context Protocol server on stdio. Its tools are the
//! agent's commands, each answered as the CLI's `--json` answers it; STATE.md is a resource.
//! Owner acts are neither offered nor possible: the process signs nothing.

pub mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResult,
    Resource, ResourceContents, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::kernel::{Code, Error, Result, Ts};

/// The resource that holds STATE.md.
pub const STATE_URI: &str = "loopx://state";

/// The longest request line read: far above any call's bounded arguments, far below memory.
const LINE_MAX: usize = 1 << 20;

/// What the server needs of the face that starts it: the commands it is a transport of, for the
/// session's agent and project.
pub trait Commands: Send + Sync + 'static {
    /// The agent the session acts as.
    fn agent(&self) -> &str;

    /// The definition of `loopx` the tools are read from.
    fn command(&self) -> clap::Command;

    /// Runs one command line at `now`, as `--json` answers it: the answer and the exit code.
    fn call(&self, now: Ts, argv: &[String]) -> (Value, i32);

    /// STATE.md as `refresh-state` writes it at `now`.
    fn state_md(&self, now: Ts) -> Result<String>;

    /// An error as a `--json` answer.
    fn error_json(&self, e: &Error) -> Value;
}

/// The server: the commands it runs and their definition, fixed when it starts.
#[derive(Clone)]
pub struct Server {
    commands: Arc<dyn Commands>,
    root: Arc<clap::Command>,
}

/// Serves MCP on stdin and stdout until the client goes; a call under way when it goes ends
/// first (each is one transaction, so none is ever half-done).
pub fn serve(commands: Arc<dyn Commands>) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(4)
        .build()
        .map_err(|e| Error::new(Code::Io, format!("cannot start the MCP server: {e}")))?;
    let server = Server {
        root: Arc::new(commands.command()),
        commands,
    };
    rt.block_on(async move {
        let (read, write) = rmcp::transport::stdio();
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(read, write)
            .with_max_line_length(LINE_MAX);
        let running = server
            .serve(transport)
            .await
            .map_err(|e| Error::new(Code::Io, format!("MCP session failed to start: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| Error::new(Code::Io, format!("MCP session failed: {e}")))?;
        Ok(())
    })
}

impl Server {
    /// Runs a tool's command line on a blocking thread, with the clock read now.
    async fn run(&self, argv: Vec<String>) -> (Value, i32) {
        let commands = Arc::clone(&self.commands);
        let job = tokio::task::spawn_blocking(move || match Ts::checked_now() {
            Ok(now) => commands.call(now, &argv),
            Err(m) => {
                let e = Error::new(Code::Io, m);
                (commands.error_json(&e), e.code.exit_code())
            }
        });
        match job.await {
            Ok(r) => r,
            Err(e) => {
                let e = Error::new(Code::Internal, format!("the call failed: {e}"));
                (self.commands.error_json(&e), e.code.exit_code())
            }
        }
    }

    /// STATE.md as `refresh-state` writes it now.
    async fn state_md(&self) -> std::result::Result<String, ErrorData> {
        let commands = Arc::clone(&self.commands);
        let job = tokio::task::spawn_blocking(move || {
            let now = Ts::checked_now().map_err(|m| Error::new(Code::Io, m))?;
            commands.state_md(now)
        });
        match job.await {
            Ok(Ok(text)) => Ok(text),
            Ok(Err(e)) => Err(ErrorData::internal_error(e.message, None)),
            Err(e) => Err(ErrorData::internal_error(e.to_string(), None)),
        }
    }
}

/// A tool's definition, as `tools/list` gives it.
fn tool(root: &clap::Command, spec: &tools::Spec) -> Tool {
    let mut annotations = ToolAnnotations::default();
    annotations.read_only_hint = Some(spec.read_only);
    annotations.destructive_hint = Some(false);
    annotations.open_world_hint = Some(false);
    Tool::new(spec.name, spec.about, tools::schema(root, spec)).with_annotations(annotations)
}

/// A call's result: the `--json` answer as structured content (and as text), an error when its
/// `ok` is false, and the CLI's exit code in `_meta.exit_code`.
fn result(answer: Value, exit: i32) -> CallToolResult {
    let ok = answer["ok"] == json!(true);
    let r = if ok {
        CallToolResult::structured(answer)
    } else {
        CallToolResult::structured_error(answer)
    };
    let mut meta = rmcp::model::MetaObject::new();
    meta.insert("exit_code".into(), json!(exit));
    r.with_meta(Some(meta))
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("loopx", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions(self.commands.agent()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            tools::TOOLS.iter().map(|t| tool(&self.root, t)).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::find(name).map(|t| tool(&self.root, t))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let Some(spec) = tools::find(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool `{}`", request.name),
                None,
            ));
        };
        let given = request.arguments.unwrap_or_default();
        let (answer, exit) = match tools::argv(&self.root, spec, &given) {
            Ok(line) => self.run(line).await,
            Err(e) => (self.commands.error_json(&e), e.code.exit_code()),
        };
        Ok(result(answer, exit).into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, ErrorData> {
        let mut r = Resource::new(STATE_URI, "STATE.md");
        r.description =
            Some("The project's state for people and agents, written fresh on each read.".into());
        r.mime_type = Some("text/markdown".into());
        Ok(ListResourcesResult::with_all_items(vec![r]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<rmcp::model::ReadResourceResponse, ErrorData> {
        if request.uri != STATE_URI {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let text = self.state_md().await?;
        let mut contents = ResourceContents::text(text, STATE_URI);
        if let ResourceContents::TextResourceContents { mime_type, .. } = &mut contents {
            *mime_type = Some("text/markdown".into());
        }
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

/// What the server tells the client about itself, and the agent it acts as: a client that
/// passes no `LOOPX_AGENT` (an inspector) learns it acts as `local`.
fn instructions(agent: &str) -> String {
    format!(
        "loopx keeps this project's durable state. This server acts as agent `{agent}`: every \
claim, evidence and turn is recorded under that id (set LOOPX_AGENT, or --agent, where the \
server is started to act as another). Each turn: turn_start, do the work (todo_update records \
evidence as you go), todo_renew while it runs long, then turn_end (the breaker counts turns so \
ended). Exit code 3 (in _meta.exit_code) means not now: stop and wait. Only the owner decides \
gates; ask with gate_open."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_carry_ok_and_the_exit_code() {
        let r = result(json!({"ok": false, "error": {"code": "stale_fence"}}), 4);
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.meta.unwrap()["exit_code"], json!(4));
        let r = result(json!({"ok": true, "decision": "idle"}), 3);
        assert_eq!(r.is_error, Some(false));
    }
}
