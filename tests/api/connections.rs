//! The listener's bounds against a real server: a flood of silent connections cannot starve a
//! well-behaved client, and a request head that never ends is cut off. Timeouts are configured
//! short (1 s). Nothing here times anything: each wait is bounded at half the timeout's *default*,
//! so a server that ignored the configured value (and used the default) fails, while the
//! configured timeout has many times its own length to fire.

use std::time::Duration;

use liaison::app::App;
use liaison::config::{Config, Overrides};
use liaison::net::ServerSettings;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::helpers::TestDb;

/// Half the default request-head timeout: long enough for a configured 1 s one, too short for the
/// default.
fn head_bound() -> Duration {
    ServerSettings::default().header_read_timeout / 2
}

/// Half the default idle timeout, likewise.
fn idle_bound() -> Duration {
    ServerSettings::default().idle_timeout / 2
}

async fn spawn_app(
    db: &TestDb,
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (std::net::SocketAddr, CancellationToken) {
    let overrides = Overrides {
        data_dir: Some(dir.to_path_buf()),
        listen: Some("127.0.0.1:0".into()),
        database_url: Some(db.url.clone()),
        ..Default::default()
    };
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    let config = Config::load(&overrides, env).unwrap();
    let stop = CancellationToken::new();
    let app = App::build(config, stop.clone()).await.unwrap();
    let addr = app.local_addr();
    tokio::spawn(app.run_until_stopped());
    (addr, stop)
}

/// Reads until the server closes the connection; `None` if it is still open after `bound`.
async fn read_to_close(tcp: &mut TcpStream, bound: Duration) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    let read = tokio::time::timeout(bound, tcp.read_to_end(&mut all)).await;
    match read {
        Ok(_) => Some(all),
        Err(_) => None,
    }
}

/// Whether the server has closed `tcp` (or sent on it) by now, without waiting.
fn still_open(tcp: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(tcp.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

async fn healthz(addr: std::net::SocketAddr) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut tcp, head_bound())
        .await
        .expect("the health check is answered");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn silent_connections_beyond_the_cap_do_not_starve_a_well_behaved_client() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop) = spawn_app(
        &db,
        dir.path(),
        &[
            ("LIAISON_SERVER__MAX_CONNECTIONS", "4"),
            ("LIAISON_SERVER__HEADER_READ_TIMEOUT_S", "1"),
        ],
    )
    .await;
    // Three times the cap, none of which ever sends a byte, each from an address of its own (so
    // no address's share is what stops them: one flooding address is the next test).
    let mut silent = Vec::new();
    for i in 0..12 {
        silent.push(connect_from([127, 0, 1, i + 1], addr).await);
    }
    let answer = healthz(addr).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok"), "{answer}");
    // The client was served only once silent connections had been closed to free a slot: the
    // first four were accepted, so the server closed at least those.
    let mut closed = 0;
    for tcp in silent.iter_mut().take(4) {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(head_bound(), tcp.read(&mut byte)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 4, "the accepted silent connections were closed");
    stop.cancel();
}

/// A connection to `addr` from the loopback address `from` (any 127.x.y.z is this host).
async fn connect_from(from: [u8; 4], addr: std::net::SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    socket.connect(addr).await.unwrap()
}

async fn get_from(from: [u8; 4], addr: std::net::SocketAddr, path: &str) -> String {
    let mut tcp = connect_from(from, addr).await;
    let head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tcp.write_all(head.as_bytes()).await.unwrap();
    let answer = read_to_close(&mut tcp, head_bound())
        .await
        .expect("answered");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn one_address_holds_only_its_share_and_the_last_slots_wait_for_new_addresses() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    // 8 slots, the last one (8/32, at least 1) kept for addresses holding none; the flood's
    // connections stay silent far longer than the test runs (default head timeout, 10 s).
    let (addr, stop) = spawn_app(
        &db,
        dir.path(),
        &[
            ("LIAISON_SERVER__MAX_CONNECTIONS", "8"),
            ("LIAISON_SERVER__MAX_CONNECTIONS_PER_ADDRESS", "4"),
        ],
    )
    .await;
    let flood = [127, 0, 0, 2];
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect_from(flood, addr).await);
    }
    // The fifth is closed at once, without waiting for any timeout.
    let mut fifth = connect_from(flood, addr).await;
    let closed = read_to_close(&mut fifth, head_bound() / 4).await;
    assert_eq!(closed.as_deref(), Some(&[][..]), "closed, nothing sent");
    // Its four hold on; other addresses are served meanwhile.
    for tcp in &held {
        assert!(still_open(tcp), "the share's connections are kept");
    }
    let answer = get_from([127, 0, 0, 3], addr, "/healthz").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A second address takes three more slots; the last free one is the reserve: its own
    // fourth is refused, a new address still gets in.
    let second = [127, 0, 0, 4];
    for _ in 0..3 {
        held.push(connect_from(second, addr).await);
    }
    // (Each accepted connection holds its slot before the next is accepted.)
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut over = connect_from(second, addr).await;
    let closed = read_to_close(&mut over, head_bound() / 4).await;
    assert_eq!(
        closed.as_deref(),
        Some(&[][..]),
        "the reserve is not for an address holding some"
    );
    let metrics = get_from([127, 0, 0, 5], addr, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    for reason in ["per_address", "reserve"] {
        let line = format!("liaison_connections_refused_total{{reason=\"{reason}\"}} 1");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    drop(held);
    stop.cancel();
}

#[tokio::test]
async fn a_request_head_that_never_ends_is_cut_off() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop) = spawn_app(
        &db,
        dir.path(),
        &[("LIAISON_SERVER__HEADER_READ_TIMEOUT_S", "1")],
    )
    .await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .await
        .unwrap();
    let answer = read_to_close(&mut tcp, head_bound()).await;
    assert!(answer.is_some(), "the half-sent request was not closed");
    stop.cancel();
}

#[tokio::test]
async fn a_keep_alive_connection_left_silent_is_closed_after_the_idle_timeout() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    // A short idle timeout and a long request-head one: what closes the connection tells which.
    let (addr, stop) = spawn_app(
        &db,
        dir.path(),
        &[
            ("LIAISON_SERVER__IDLE_TIMEOUT_S", "1"),
            ("LIAISON_SERVER__HEADER_READ_TIMEOUT_S", "3600"),
        ],
    )
    .await;
    // Never sends a byte: only the request-head timeout applies to it.
    let silent = TcpStream::connect(addr).await.unwrap();
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut tcp, idle_bound())
        .await
        .expect("the idle keep-alive connection was not closed within half the default timeout");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    // Closed by the idle timeout, which never applies to a connection without a request.
    assert!(still_open(&silent), "the silent connection was closed too");
    stop.cancel();
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_after_the_idle_timeout() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop) = spawn_app(
        &db,
        dir.path(),
        &[
            ("LIAISON_SERVER__IDLE_TIMEOUT_S", "1"),
            ("LIAISON_SERVER__HEADER_READ_TIMEOUT_S", "1"),
        ],
    )
    .await;
    // The HTTP/2 preface and an empty SETTINGS frame, then no request: the connection has started
    // but carries nothing. The client acknowledges what a live client acknowledges (SETTINGS and
    // PINGs, which the server's graceful close waits for), so only the server's timeout ends it.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let closed =
        tokio::time::timeout(head_bound().min(idle_bound()), http2_until_closed(&mut tcp)).await;
    assert!(
        closed.is_ok(),
        "the idle HTTP/2 connection was not closed within half the default timeout"
    );
    stop.cancel();
}

/// Reads HTTP/2 frames until the server closes the connection, acknowledging its SETTINGS and
/// PINGs as a live client does.
async fn http2_until_closed(tcp: &mut TcpStream) {
    let mut head = [0u8; 9];
    while tcp.read_exact(&mut head).await.is_ok() {
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let mut payload = vec![0u8; len];
        if tcp.read_exact(&mut payload).await.is_err() {
            return;
        }
        let ack = flags & 0x1 != 0;
        let reply: Option<Vec<u8>> = match kind {
            // SETTINGS: an empty SETTINGS with ACK.
            0x4 if !ack => Some(vec![0, 0, 0, 0x4, 0x1, 0, 0, 0, 0]),
            // PING: the same 8 bytes back with ACK.
            0x6 if !ack => Some([&[0, 0, 8, 0x6, 0x1, 0, 0, 0, 0][..], &payload].concat()),
            _ => None,
        };
        if let Some(reply) = reply
            && tcp.write_all(&reply).await.is_err()
        {
            return;
        }
    }
}

/// An answer given before its request body was read (here: a body over every limit, refused at
/// its head) says `Connection: close`, since the server closes the connection rather than read
/// the rest: a keep-alive client must not send its next request there.
#[tokio::test]
async fn an_answer_given_before_its_body_was_read_says_connection_close() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop) = spawn_app(&db, dir.path(), &[]).await;
    let head_of = |request: String| async move {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tokio::time::timeout(head_bound(), tcp.read(&mut buf))
                .await
                .expect("an answer")
                .unwrap();
            assert!(n > 0, "closed without an answer");
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).to_ascii_lowercase()
    };
    for path in ["/admin/v1/persons", "/api/v1/messages", "/console/logout"] {
        let head = head_of(format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: 50000000\r\n\r\n{{\"id\":"
        ))
        .await;
        assert!(head.contains("\r\nconnection: close\r\n"), "{path}: {head}");
    }
    // Nothing left unread: the connection stays open (no such header).
    let head = head_of("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n".to_owned()).await;
    assert!(!head.contains("connection: close"), "{head}");
    stop.cancel();
}

/// Sends one `GET /healthz` whose head carries a header of `filler` bytes; the status line.
async fn status_with_header_of(addr: std::net::SocketAddr, filler: usize) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Filler: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(filler)
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let answer = read_to_close(&mut tcp, head_bound())
        .await
        .expect("an answer, then the connection closed");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    answer.lines().next().unwrap_or_default().to_owned()
}

/// A request head is bounded (`[server] max_request_head_kib`, 8 KiB by default): a longer one is
/// refused with 431 and the connection closed, one within the bound is served, and a raised
/// bound serves a head the default refuses.
#[tokio::test]
async fn a_request_head_beyond_its_bound_is_refused_with_431() {
    type Env<'a> = &'a [(&'a str, &'a str)];
    // (configuration, a header within the bound in KiB, one beyond it)
    let bounds: [(Env<'_>, usize, usize); 2] = [
        (&[], 7, 9),
        (&[("LIAISON_SERVER__MAX_REQUEST_HEAD_KIB", "16")], 12, 17),
    ];
    for (env, within, beyond) in bounds {
        let db = TestDb::new().await;
        let dir = tempfile::tempdir().unwrap();
        let (addr, stop) = spawn_app(&db, dir.path(), env).await;
        assert_eq!(
            status_with_header_of(addr, within * 1024).await,
            "HTTP/1.1 200 OK",
            "{env:?}"
        );
        assert_eq!(
            status_with_header_of(addr, beyond * 1024).await,
            "HTTP/1.1 431 Request Header Fields Too Large",
            "{env:?}"
        );
        stop.cancel();
    }
}
