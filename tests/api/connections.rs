//! The listener's bounds against a real server: a flood of silent connections cannot starve a
//! well-behaved client, and a request head that never ends is cut off. Timeouts are configured
//! short; nothing here asserts a duration, only that things happen within generous bounds.

use std::time::Duration;

use liaison::app::App;
use liaison::config::{Config, Overrides};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::helpers::TestDb;

/// Far above every configured timeout: only a server that never closes fails it.
const GENEROUS: Duration = Duration::from_secs(60);

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

/// Reads until the server closes the connection; `None` if it is still open after [`GENEROUS`].
async fn read_to_close(tcp: &mut TcpStream) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    let read = tokio::time::timeout(GENEROUS, tcp.read_to_end(&mut all)).await;
    match read {
        Ok(_) => Some(all),
        Err(_) => None,
    }
}

async fn healthz(addr: std::net::SocketAddr) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut tcp)
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
    // Three times the cap, none of which ever sends a byte.
    let mut silent = Vec::new();
    for _ in 0..12 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    let answer = healthz(addr).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok"), "{answer}");
    // The client was served only once silent connections had been closed to free a slot: the
    // first four were accepted, so the server closed at least those.
    let mut closed = 0;
    for tcp in silent.iter_mut().take(4) {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(GENEROUS, tcp.read(&mut byte)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 4, "the accepted silent connections were closed");
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
    let answer = read_to_close(&mut tcp).await;
    assert!(answer.is_some(), "the half-sent request was never closed");
    // A keep-alive connection left silent after its first answer is closed too.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut tcp).await.expect("closed when idle");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
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
    // The HTTP/2 preface and an empty SETTINGS frame, then silence: the connection has started
    // but carries no request.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let answer = read_to_close(&mut tcp).await;
    assert!(
        answer.is_some(),
        "the idle HTTP/2 connection was never closed"
    );
    stop.cancel();
}
