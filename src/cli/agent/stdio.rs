//! `liaison mcp --stdio`: the same tools over stdio, for clients that only speak stdio. It serves no
//! data itself: each tool call is forwarded to a running liaison server (URL and token from the
//! environment) as one stateless MCP request. Logs go to stderr; stdout carries only MCP.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::Value;

use super::client::Remote;
use crate::mcp::Tools;
use crate::mcp::progress::with_progress;
use crate::mcp::tools::server_info;

/// Forwards every tool call to the server.
#[derive(Clone)]
struct Proxy {
    remote: Remote,
    /// The tools as the server declares them (same code, so no round trip needed).
    tools: Vec<Tool>,
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        server_info()
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let wait_s = arguments["wait_s"].as_u64().unwrap_or(0).min(50);
        let call = self
            .remote
            .call(&request.name, arguments, Duration::from_secs(wait_s));
        let result = match with_progress(call, &context, wait_s).await {
            None => failure("The call was cancelled; nothing new was acknowledged.".to_owned()),
            Some(Err(e)) => failure(format!(
                "Error unavailable: {e:#}. Is the liaison server running?"
            )),
            Some(Ok(answer)) => serde_json::from_value::<CallToolResult>(answer.result)
                .unwrap_or_else(|e| {
                    failure(format!(
                        "Error internal: unreadable answer from the server: {e}"
                    ))
                }),
        };
        Ok(result.into())
    }
}

fn failure(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Serves MCP on stdin/stdout until the client closes it.
pub(super) async fn serve(remote: Remote) -> anyhow::Result<()> {
    let proxy = Proxy {
        remote,
        tools: Tools::router().list_all(),
    };
    let running = proxy.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
