//! A2A front benchmark (not a test): throughput and latency of `SendMessage` with
//! `configuration.returnImmediately = true` on each binding (JSON-RPC, HTTP+JSON, gRPC), with 1 and
//! 64 requests in flight, against the real server process: the `liaison` binary runs
//! `serve --demo` on a fresh data directory with SQLite and, when `LIAISON_BENCH_PG_URL` is set,
//! again on a fresh PostgreSQL database (created on that server and dropped afterwards).
//!
//! Run: `cargo bench --bench a2a` (add `LIAISON_BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/postgres`).
//!
//! Every request is the demo party `partner` (`Authorization: Bearer …`, `A2A-Version: 1.0`)
//! creating a new task: a user message with a fresh `messageId` and one text part, no `taskId`, so
//! it is routed to the card's default skill. Every response is checked (HTTP 200 or gRPC status
//! OK, and a Task in `TASK_STATE_SUBMITTED`); failures are counted in the table and printed below
//! it. Each cell starts with a short unmeasured warm-up at the same concurrency (it also opens the
//! connections), then sends a fixed number of requests from `concurrency` workers; requests/s
//! counts the successful ones over the cell's wall time, p50/p99 are their latencies. One server
//! per backend serves all cells, in the order of the table (every binding at concurrency 1, then
//! at 64), so the later cells run on a store holding the earlier cells' tasks (about 10,000).
//!
//! Connections, per binding:
//! - JSON-RPC and HTTP+JSON: one pooled `reqwest` client (HTTP/1.1), so one keep-alive connection
//!   per request in flight: 1, or 64.
//! - gRPC: a hand-rolled unary call (length-prefixed protobuf, `grpc-status` read from the
//!   trailers) over `hyper`'s HTTP/2 client, h2c on the same port. One connection at concurrency 1
//!   and [`GRPC_CONNECTIONS`] (4) multiplexing the 64 streams at concurrency 64: a gRPC client
//!   normally multiplexes many calls over few connections (one per channel), while one connection
//!   for all 64 would serialise every frame through a single connection task on each side; 4
//!   keeps that task from being what is measured on 2 cores and is still a realistic client.
//!
//! The protobuf types of the server (`crate::wire::pb`) are private to the crate, so the bench
//! declares the few fields it sends and reads below, with the field numbers of `proto/a2a.proto`
//! (a mismatch would fail every gRPC response check).
//!
//! `srv CPU ms/r` is the CPU time (user + system, from `/proc/<pid>/stat`; `-` where there is no
//! such file) the liaison process spent during the cell, per request. It depends much less than
//! the rates on what else runs on the machine, so it is the better figure to compare bindings by.
//! It does not include the database server's own CPU (PostgreSQL runs in other processes).
//!
//! Client and server share the machine's cores, so on a small machine the figures are lower
//! bounds for the server.

#![allow(clippy::disallowed_methods)] // a client of the server under test

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, TE};
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};
use liaison::wire::params::{VERSION_HEADER, VERSION_METADATA};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// Requests measured per cell, by concurrency.
const CELLS: [(usize, usize); 2] = [(1, 300), (64, 3_000)];
/// HTTP/2 connections the gRPC client multiplexes over at concurrency > 1.
const GRPC_CONNECTIONS: usize = 4;
/// Longest one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const SUBMITTED: &str = "TASK_STATE_SUBMITTED";
/// `TaskState.TASK_STATE_SUBMITTED` and `Role.ROLE_USER` in the proto.
const SUBMITTED_PB: i32 = 1;
const ROLE_USER_PB: i32 = 1;
#[path = "support/mod.rs"]
mod support;
use support::Outcome;

#[tokio::main]
async fn main() {
    liaison::net::tls::install_crypto_provider();
    println!(
        "{:8} {:9} {:>4} {:>6} {:>10} {:>8} {:>8} {:>6} {:>12}",
        "backend",
        "binding",
        "conc",
        "reqs",
        "requests/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "srv CPU ms/r"
    );
    run("sqlite", None).await;
    support::with_postgres(|url| async move { run("postgres", Some(&url)).await }).await;
}

#[derive(Debug, Clone, Copy)]
enum Binding {
    JsonRpc,
    Rest,
    Grpc,
}

impl Binding {
    const ALL: [Binding; 3] = [Binding::JsonRpc, Binding::Rest, Binding::Grpc];

    fn name(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSON-RPC",
            Binding::Rest => "HTTP+JSON",
            Binding::Grpc => "gRPC",
        }
    }
}

async fn run(backend: &str, database_url: Option<&str>) {
    let server = Server::start(database_url).await;
    for (concurrency, requests) in CELLS {
        for binding in Binding::ALL {
            let client = Arc::new(Client::connect(&server, binding, concurrency).await);
            let warmup = measure(&client, concurrency, (2 * concurrency).max(30)).await;
            let cpu_before = server.cpu_time();
            let cell = measure(&client, concurrency, requests).await;
            let cpu = server
                .cpu_time()
                .zip(cpu_before)
                .map(|(after, before)| after - before);
            let ms = cell.latencies_ms();
            println!(
                "{backend:8} {:9} {concurrency:>4} {requests:>6} {:>10.0} {:>8.2} {:>8.2} {:>6} {:>12}",
                binding.name(),
                ms.len() as f64 / cell.elapsed.as_secs_f64(),
                support::percentile(&ms, 0.50),
                support::percentile(&ms, 0.99),
                cell.failed,
                cpu.map_or("-".into(), |cpu| format!(
                    "{:.2}",
                    cpu.as_secs_f64() * 1e3 / requests as f64
                )),
            );
            warmup.report("warm-up");
            cell.report("measured");
        }
    }
    server.stop().await;
}

/// Sends `requests` requests from `concurrency` workers, each taking the next request number.
async fn measure(client: &Arc<Client>, concurrency: usize, requests: usize) -> Outcome {
    let client = client.clone();
    support::measure(concurrency, requests, move |worker, n| {
        let client = client.clone();
        async move {
            tokio::time::timeout(REQUEST_TIMEOUT, client.send(worker, n))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {REQUEST_TIMEOUT:?}")))
        }
    })
    .await
}

/// A client of one binding, shared by the workers of a cell.
enum Client {
    Http {
        http: reqwest::Client,
        url: String,
        jsonrpc: bool,
        token: String,
    },
    Grpc {
        connections: Vec<SendRequest<Full<Bytes>>>,
        uri: Uri,
        auth: HeaderValue,
    },
}

impl Client {
    async fn connect(server: &Server, binding: Binding, concurrency: usize) -> Client {
        let token = server.token.clone();
        match binding {
            Binding::JsonRpc | Binding::Rest => {
                let http = reqwest::Client::builder()
                    .timeout(REQUEST_TIMEOUT)
                    .build()
                    .expect("an HTTP client");
                let jsonrpc = matches!(binding, Binding::JsonRpc);
                let url = if jsonrpc {
                    format!("{}/a2a/jsonrpc", server.url)
                } else {
                    format!("{}/a2a/rest/message:send", server.url)
                };
                Client::Http {
                    http,
                    url,
                    jsonrpc,
                    token,
                }
            }
            Binding::Grpc => {
                let count = if concurrency == 1 {
                    1
                } else {
                    GRPC_CONNECTIONS
                };
                let mut connections = Vec::with_capacity(count);
                for _ in 0..count {
                    connections.push(h2_connect(server.addr).await);
                }
                Client::Grpc {
                    connections,
                    uri: format!("http://{}/lf.a2a.v1.A2AService/SendMessage", server.addr)
                        .parse()
                        .unwrap(),
                    auth: HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
                }
            }
        }
    }

    /// Sends request number `n` and checks that it created a submitted task.
    async fn send(&self, worker: usize, n: usize) -> Result<(), String> {
        let message_id = uuid::Uuid::now_v7().to_string();
        let text = format!("bench request {n}");
        match self {
            Client::Http {
                http,
                url,
                jsonrpc,
                token,
            } => {
                let params = json!({
                    "message": {
                        "messageId": message_id,
                        "role": "ROLE_USER",
                        "parts": [{"text": text}],
                    },
                    "configuration": {"returnImmediately": true},
                });
                let body = if *jsonrpc {
                    json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": params})
                } else {
                    params
                };
                let response = http
                    .post(url)
                    .bearer_auth(token)
                    .header(VERSION_HEADER, "1.0")
                    .json(&body)
                    .send()
                    .await
                    .map_err(|e| format!("HTTP request failed: {e}"))?;
                let status = response.status();
                let text = response
                    .text()
                    .await
                    .map_err(|e| format!("HTTP body failed: {e}"))?;
                if status != StatusCode::OK {
                    // The error object alone: a JSON-RPC envelope's id differs per request.
                    let error = serde_json::from_str::<Value>(&text)
                        .ok()
                        .and_then(|v| v.get("error").map(Value::to_string));
                    return Err(format!(
                        "HTTP {status}: {}",
                        clip(error.as_deref().unwrap_or(&text))
                    ));
                }
                let value: Value = serde_json::from_str(&text)
                    .map_err(|e| format!("invalid JSON ({e}): {}", clip(&text)))?;
                let response = if *jsonrpc {
                    if let Some(error) = value.get("error") {
                        return Err(format!("JSON-RPC error: {}", clip(&error.to_string())));
                    }
                    &value["result"]
                } else {
                    &value
                };
                let task = &response["task"];
                let state = task["status"]["state"].as_str().unwrap_or_default();
                if task["id"].as_str().is_none_or(str::is_empty) || state != SUBMITTED {
                    return Err(format!("not a submitted task: {}", clip(&text)));
                }
                Ok(())
            }
            Client::Grpc {
                connections,
                uri,
                auth,
            } => {
                let request = pb::SendMessageRequest {
                    message: Some(pb::Message {
                        message_id,
                        role: ROLE_USER_PB,
                        parts: vec![pb::Part { text: Some(text) }],
                    }),
                    configuration: Some(pb::SendMessageConfiguration {
                        return_immediately: true,
                    }),
                };
                let mut sender = connections[worker % connections.len()].clone();
                let reply: pb::SendMessageResponse =
                    grpc_unary(&mut sender, uri.clone(), auth.clone(), &request).await?;
                let task = reply.task.ok_or("the response holds no task")?;
                let state = task.status.map_or(0, |s| s.state);
                if task.id.is_empty() || state != SUBMITTED_PB {
                    return Err(format!(
                        "not a submitted task: id {:?}, state {state}",
                        task.id
                    ));
                }
                Ok(())
            }
        }
    }
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// An HTTP/2 cleartext connection (prior knowledge, as gRPC clients do for h2c).
async fn h2_connect(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(tcp))
        .await
        .expect("an HTTP/2 connection");
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            println!("    gRPC connection ended: {e}");
        }
    });
    sender
}

/// One unary gRPC call: the 5-byte frame header and the protobuf request as the body, then the
/// single response message and `grpc-status` from the trailers (or from the headers of a
/// trailers-only response).
async fn grpc_unary<Req: prost::Message, Resp: prost::Message + Default>(
    sender: &mut SendRequest<Full<Bytes>>,
    uri: Uri,
    auth: HeaderValue,
    request: &Req,
) -> Result<Resp, String> {
    let len = request.encoded_len();
    let mut frame = Vec::with_capacity(5 + len);
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(len).unwrap().to_be_bytes());
    request.encode(&mut frame).unwrap();
    let request = Request::post(uri)
        .header(CONTENT_TYPE, "application/grpc")
        .header(TE, "trailers")
        .header(AUTHORIZATION, auth)
        .header(VERSION_METADATA, "1.0")
        .body(Full::new(Bytes::from(frame)))
        .unwrap();
    sender
        .ready()
        .await
        .map_err(|e| format!("HTTP/2 connection unusable: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("HTTP/2 request failed: {e}"))?;
    let (head, body) = response.into_parts();
    if head.status != StatusCode::OK {
        return Err(format!("HTTP {} on the gRPC route", head.status));
    }
    let body = body
        .collect()
        .await
        .map_err(|e| format!("HTTP/2 body failed: {e}"))?;
    let trailers = body.trailers().cloned().unwrap_or_default();
    let data = body.to_bytes();
    let field = |name: &str| {
        trailers
            .get(name)
            .or_else(|| head.headers.get(name))
            .map(|v| v.to_str().unwrap_or("(not text)").to_owned())
    };
    match field("grpc-status").as_deref() {
        Some("0") => {}
        Some(code) => {
            return Err(format!(
                "grpc-status {code}: {}",
                field("grpc-message").unwrap_or_default()
            ));
        }
        None => return Err("no grpc-status".into()),
    }
    if data.len() < 5 || data[0] != 0 {
        return Err(format!(
            "not one uncompressed gRPC message ({} bytes)",
            data.len()
        ));
    }
    let len = u32::from_be_bytes(data[1..5].try_into().unwrap()) as usize;
    if data.len() != 5 + len {
        return Err(format!(
            "gRPC frame of {len} bytes in a body of {}",
            data.len()
        ));
    }
    Resp::decode(&data[5..]).map_err(|e| format!("undecodable response: {e}"))
}

/// The `liaison serve --demo` process and what the bench needs from it.
struct Server {
    child: tokio::process::Child,
    /// The public base URL it printed (`http://127.0.0.1:PORT`).
    url: String,
    addr: SocketAddr,
    /// The demo party `partner`'s agent token.
    token: String,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(database_url: Option<&str>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_liaison"));
        command
            .arg("serve")
            .arg("--demo")
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--listen", "127.0.0.1:0"]);
        if let Some(url) = database_url {
            command.args(["--database-url", url]);
        }
        command
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("the liaison binary starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (url, addr) = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                // "liaison is serving at http://127.0.0.1:PORT (listening on 127.0.0.1:PORT)"
                if let Some((_, rest)) = line.split_once("serving at ") {
                    let (url, rest) = rest.split_once(' ').unwrap();
                    let addr = rest
                        .trim_start_matches("(listening on ")
                        .trim_end_matches(')');
                    return (url.to_owned(), addr.parse::<SocketAddr>().unwrap());
                }
            }
            panic!("liaison exited before serving");
        })
        .await
        .expect("liaison serves within 60 s");
        // Keep reading stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let demo = std::fs::read_to_string(dir.path().join(liaison::app::demo::DEMO_FILE)).unwrap();
        let demo: liaison::app::demo::Demo = serde_json::from_str(&demo).unwrap();
        Server {
            child,
            url,
            addr,
            token: demo.partner.agent_token,
            _dir: dir,
        }
    }

    /// The CPU time (user + system) the server process has used so far, on Linux.
    fn cpu_time(&self) -> Option<Duration> {
        support::cpu_time(self.child.id()?)
    }

    /// SIGTERM (a graceful stop that closes the store), SIGKILL after 15 s.
    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .is_err()
        {
            println!("    liaison did not stop within 15 s after SIGTERM; killing it");
            let _ = self.child.kill().await;
        }
    }
}

/// The fields of the `lf.a2a.v1` messages the bench sends and reads, with the proto's numbers.
/// Fields left out are skipped on decoding, as protobuf does with unknown fields.
mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct SendMessageRequest {
        #[prost(message, optional, tag = "2")]
        pub message: Option<Message>,
        #[prost(message, optional, tag = "3")]
        pub configuration: Option<SendMessageConfiguration>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Message {
        #[prost(string, tag = "1")]
        pub message_id: String,
        /// `Role` (an enum: a varint on the wire).
        #[prost(int32, tag = "4")]
        pub role: i32,
        #[prost(message, repeated, tag = "5")]
        pub parts: Vec<Part>,
    }

    /// `Part`: only the `text` member (1) of its `content` oneof.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Part {
        #[prost(string, optional, tag = "1")]
        pub text: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct SendMessageConfiguration {
        #[prost(bool, tag = "4")]
        pub return_immediately: bool,
    }

    /// `SendMessageResponse`: only the `task` member (1) of its `payload` oneof.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct SendMessageResponse {
        #[prost(message, optional, tag = "1")]
        pub task: Option<Task>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Task {
        #[prost(string, tag = "1")]
        pub id: String,
        #[prost(message, optional, tag = "3")]
        pub status: Option<TaskStatus>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TaskStatus {
        /// `TaskState` (an enum: a varint on the wire).
        #[prost(int32, tag = "1")]
        pub state: i32,
    }
}
