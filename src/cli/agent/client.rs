//! A minimal MCP client of a running liaison server, for the agent-side helpers (`mcp --stdio`, the
//! hooks, `watch`): one stateless 2026-07-28 `tools/call` per POST to `/mcp`, so no session to keep
//! and nothing to re-initialise when the server restarts.

use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};

/// The protocol revision the helpers speak: stateless, one request per POST.
const PROTOCOL: &str = "2026-07-28";

/// Where the helpers find the server and who they are.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    http: reqwest::Client,
    /// The `/mcp` endpoint.
    endpoint: String,
    /// The server's base URL (for `/api/v1`).
    base: String,
    /// The person's agent token (sent as `Authorization: Bearer`).
    token: String,
    /// Sent as `Liaison-Agent` when set.
    agent: Option<String>,
}

/// A tool call the server answered: a tool error is still an answer.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The whole `CallToolResult` as JSON.
    pub result: Value,
    pub is_error: bool,
}

impl Answer {
    /// The structured content, or the tool error's text as an error.
    pub(crate) fn into_structured(self) -> anyhow::Result<Value> {
        if self.is_error {
            anyhow::bail!("{}", self.text());
        }
        Ok(self.result["structuredContent"].clone())
    }

    /// The text blocks, joined.
    pub(crate) fn text(&self) -> String {
        let blocks = self.result["content"].as_array().into_iter().flatten();
        blocks
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Remote {
    /// `url` is the server's base URL (e.g. `http://127.0.0.1:8080`).
    pub(crate) fn new(url: &str, token: &str, agent: Option<String>) -> anyhow::Result<Self> {
        anyhow::ensure!(
            !token.trim().is_empty(),
            "no token: set LIAISON_TOKEN to your agent token"
        );
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        let base = url.trim_end_matches('/').to_owned();
        let endpoint = format!("{base}/mcp");
        Ok(Self {
            http,
            endpoint,
            base,
            token: token.trim().to_owned(),
            agent,
        })
    }

    /// Calls one tool. `wait` is how long the call may legitimately take (a long-poll's `wait_s`).
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Value,
        wait: Duration,
    ) -> anyhow::Result<Answer> {
        let body = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": tool,
                "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": { "name": "liaison-cli", "version": env!("CARGO_PKG_VERSION") },
                },
            },
        });
        let mut request = self
            .http
            .post(&self.endpoint)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .timeout(wait + Duration::from_secs(30))
            .json(&body);
        if let Some(agent) = &self.agent {
            request = request.header("liaison-agent", agent);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("Could not reach {}", self.endpoint))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .with_context(|| format!("No answer from {}", self.endpoint))?;
        if !status.is_success() {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or(text);
            anyhow::bail!("{} answered {status}: {message}", self.endpoint);
        }
        let reply = json_rpc_reply(&text)
            .with_context(|| format!("Unexpected answer from {}", self.endpoint))?;
        if let Some(error) = reply.get("error") {
            anyhow::bail!(
                "{tool} failed: {}",
                error["message"].as_str().unwrap_or("unknown error")
            );
        }
        let result = reply["result"].clone();
        Ok(Answer {
            is_error: result["isError"] == true,
            result,
        })
    }

    /// Sends a member API request (`body` given: POST, else GET) and answers its status and JSON
    /// body, whatever the status; an error only when no answer came (unreachable, timed out).
    pub(crate) async fn send_api(
        &self,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        let url = format!("{}{path}", self.base);
        let mut request = match body {
            Some(b) => self.http.post(&url).json(b),
            None => self.http.get(&url),
        }
        .bearer_auth(&self.token)
        .timeout(timeout);
        if let Some(agent) = &self.agent {
            request = request.header("liaison-agent", agent);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("Could not reach {url}"))?;
        let status = response.status();
        let value: Value = response
            .json()
            .await
            .with_context(|| format!("{url} answered {status} without JSON"))?;
        Ok((status, value))
    }

    /// POSTs `body` to the member API at `path` (e.g. `/api/v1/progress`) within `timeout`;
    /// answers the JSON body, or the API's error message.
    pub(crate) async fn post_api(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut request = self
            .http
            .post(&url)
            .bearer_auth(&self.token)
            .timeout(timeout)
            .json(body);
        if let Some(agent) = &self.agent {
            request = request.header("liaison-agent", agent);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("Could not reach {url}"))?;
        let status = response.status();
        let value: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            anyhow::bail!(
                "{url} answered {status}: {}",
                value["error"]["message"].as_str().unwrap_or("no message")
            );
        }
        Ok(value)
    }
}

/// The JSON-RPC response in a body that is either JSON or an SSE stream of JSON-RPC messages.
fn json_rpc_reply(body: &str) -> anyhow::Result<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return Ok(v);
    }
    let mut data = String::new();
    let mut found = None;
    for line in body.lines().chain(std::iter::once("")) {
        if let Some(d) = line.strip_prefix("data:") {
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(v) = serde_json::from_str::<Value>(&data)
                && (v.get("result").is_some() || v.get("error").is_some())
            {
                found = Some(v);
            }
            data.clear();
        }
    }
    found.ok_or_else(|| anyhow::anyhow!("no JSON-RPC response in the body"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_found_in_json_and_in_sse_bodies() {
        let json_body = r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false}}"#;
        assert_eq!(json_rpc_reply(json_body).unwrap()["id"], 1);
        let sse = "id: 0\nretry: 3000\ndata:\n\n: keep-alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n";
        assert!(json_rpc_reply(sse).unwrap()["result"]["content"].is_array());
        assert!(json_rpc_reply("data: {}\n\n").is_err());
    }
}
