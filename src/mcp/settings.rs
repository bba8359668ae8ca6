//! The MCP front's own settings, resolved by `crate::config` from `[mcp]` (the front stands below
//! the configuration, which builds every front's settings).

use std::time::Duration;

/// The MCP front's settings.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// `Host` values `/mcp` accepts (DNS-rebinding guard). Empty: loopback names plus the host of
    /// the public URL. `*` alone: any host.
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin` values `/mcp` accepts (with scheme); empty: requests with an `Origin` are
    /// accepted only when it is the public URL's origin or a loopback one.
    pub allowed_origins: Vec<String>,
    /// Legacy (`Mcp-Session-Id`) sessions one token may hold; at the cap the oldest idle one is
    /// closed to make room.
    pub sessions_per_token: usize,
    /// Idle time after which a legacy session is closed.
    pub session_idle: Duration,
    /// Interval of SSE keep-alive comments on MCP streams.
    pub sse_keep_alive: Duration,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            sessions_per_token: 16,
            session_idle: Duration::from_secs(300),
            sse_keep_alive: Duration::from_secs(15),
        }
    }
}
