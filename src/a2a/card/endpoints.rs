//! Where the three bindings are served, as the card advertises them.

use super::*;
use crate::wire::pb;

/// Where the three bindings are served, as the card advertises them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// The configured public base URL, without a trailing slash.
    pub public_url: String,
    /// JSON-RPC endpoint URL.
    pub jsonrpc_url: String,
    /// HTTP+JSON base URL (the proto's routes are appended to it).
    pub rest_url: String,
    /// gRPC `host:port` (no scheme, as the spec and the conformance kit expect); `None` when gRPC
    /// is not served.
    pub grpc_authority: Option<String>,
}

impl Endpoints {
    /// JSON-RPC at `<public>/a2a/jsonrpc`, HTTP+JSON at `<public>/a2a/rest`, gRPC at
    /// `grpc_authority` (e.g. the authority of the public URL when gRPC shares the HTTP port).
    pub fn standard(public_url: &str, grpc_authority: Option<String>) -> Endpoints {
        let public_url = public_url.trim_end_matches('/').to_owned();
        Endpoints {
            jsonrpc_url: format!("{public_url}/a2a/jsonrpc"),
            rest_url: format!("{public_url}/a2a/rest"),
            public_url,
            grpc_authority,
        }
    }

    /// `host:port` of a URL (the port made explicit from the scheme when absent).
    pub fn authority_of(url: &str) -> Option<String> {
        let (scheme, rest) = url.split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        if authority.is_empty() {
            return None;
        }
        let has_port = match authority.rfind(']') {
            Some(bracket) => authority[bracket..].contains(':'),
            None => authority.contains(':'),
        };
        if has_port {
            return Some(authority.to_owned());
        }
        let port = match scheme {
            "https" => 443,
            "http" => 80,
            _ => return None,
        };
        Some(format!("{authority}:{port}"))
    }

    pub(super) fn interfaces(&self) -> Vec<pb::AgentInterface> {
        let interface = |url: &str, binding: &str| pb::AgentInterface {
            url: url.to_owned(),
            protocol_binding: binding.to_owned(),
            tenant: String::new(),
            protocol_version: PROTOCOL_VERSION.to_owned(),
        };
        // Only bindings that are served are advertised: an empty URL means "not served".
        let mut interfaces = vec![interface(&self.jsonrpc_url, "JSONRPC")];
        if !self.rest_url.is_empty() {
            interfaces.push(interface(&self.rest_url, "HTTP+JSON"));
        }
        if let Some(grpc) = &self.grpc_authority {
            interfaces.push(interface(grpc, "GRPC"));
        }
        interfaces
    }

    /// The `jku` of our signatures.
    pub fn jwks_url(&self) -> String {
        format!("{}{JWKS_PATH}", self.public_url)
    }
}
