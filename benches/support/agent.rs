//! The MCP side of the benchmarks: rmcp's own client (the server's SDK) on legacy `initialize`
//! sessions (protocol 2025-11-25, as Claude Code and Codex connect), one [`Agent`] per session.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::Value;

/// Longest one ordinary tool call or A2A request may take before it counts as failed.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP client under the MCP sessions: no overall timeout (long-polls), keep-alive pooling
/// (HTTP/1.1: one connection per call in flight, as an agent's HTTP stack does).
pub(crate) fn mcp_http() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

/// One agent session: an rmcp client on a legacy MCP session (`initialize`, `Mcp-Session-Id`).
pub(crate) struct Agent {
    session: RunningService<RoleClient, ClientConfig>,
}

/// Why a tool call failed.
pub(crate) enum CallError {
    /// The tool answered `isError: true` with liaison's error code.
    Tool { code: String, message: String },
    /// Transport, protocol or timeout.
    Other(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Tool { code, message } => write!(f, "tool error {code}: {message}"),
            CallError::Other(message) => f.write_str(message),
        }
    }
}

impl Agent {
    /// Opens a session; panics when the server refuses it (the bench cannot go on).
    pub(crate) async fn connect(http: &reqwest::Client, mcp_url: &str, token: &str) -> Agent {
        Agent::try_connect(http, mcp_url, token)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    pub(crate) async fn try_connect(
        http: &reqwest::Client,
        mcp_url: &str,
        token: &str,
    ) -> Result<Agent, String> {
        let config = StreamableHttpClientTransportConfig::with_uri(mcp_url.to_owned())
            .auth_header(token.to_owned())
            // Tool calls in flight on this session (each its own POST).
            .max_concurrent_requests(256);
        let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("liaison-bench", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let session = tokio::time::timeout(CALL_TIMEOUT, info.serve(transport))
            .await
            .map_err(|_| format!("MCP initialize: no answer within {CALL_TIMEOUT:?}"))?
            .map_err(|e| format!("MCP initialize failed: {e}"))?;
        Ok(Agent { session })
    }

    /// Calls `tool`; a result is its structured content (an object), checked not to be an error.
    pub(crate) async fn call(
        &self,
        tool: &'static str,
        args: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let Value::Object(args) = args else {
            panic!("tool arguments are an object");
        };
        let params = CallToolRequestParams::new(tool).with_arguments(args);
        let result = tokio::time::timeout(timeout, self.session.peer().call_tool(params))
            .await
            .map_err(|_| CallError::Other(format!("{tool}: no answer within {timeout:?}")))?
            .map_err(|e| CallError::Other(format!("{tool}: {e}")))?;
        let value = result.structured_content.unwrap_or(Value::Null);
        if result.is_error == Some(true) {
            return Err(CallError::Tool {
                code: value["error"]["code"].as_str().unwrap_or("?").to_owned(),
                message: value["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        if !value.is_object() {
            return Err(CallError::Other(format!(
                "{tool}: no structured content in the result"
            )));
        }
        Ok(value)
    }

    /// Ends the session (HTTP DELETE).
    pub(crate) async fn close(self) {
        let _ = self.session.cancel().await;
    }
}

pub(crate) async fn close_all<T>(agents: Arc<Vec<(Agent, T)>>) {
    if let Some(agents) = Arc::into_inner(agents) {
        for (agent, _) in agents {
            agent.close().await;
        }
    }
}

/// `value` as JSON text, cut after 300 characters (for error messages).
pub(crate) fn clip(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}
