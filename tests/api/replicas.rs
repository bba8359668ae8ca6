//! Several servers on one database sign the Agent Card with one key ring: a client may fetch the
//! card from one replica and the key set from another. The ring lives in the store; a replica with
//! another master key refuses to start; an earlier version's key file is adopted.

use std::path::Path;

use liaison::app::App;
use liaison::config::{Config, Overrides};
use liaison::keys::jose::verify_card;
use liaison::keys::ring::{Jwks, MasterKey, SigningKey};
use tokio_util::sync::CancellationToken;

use crate::helpers::TestDb;

const MASTER_HEX: &str = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";

async fn build(db: &TestDb, dir: &Path) -> anyhow::Result<(String, CancellationToken)> {
    let overrides = Overrides {
        data_dir: Some(dir.to_path_buf()),
        listen: Some("127.0.0.1:0".into()),
        database_url: Some(db.url.clone()),
        ..Default::default()
    };
    let stop = CancellationToken::new();
    let app = App::build(Config::load(&overrides, [])?, stop.clone()).await?;
    let url = app.public_url().to_owned();
    tokio::spawn(app.run_until_stopped());
    Ok((url, stop))
}

fn data_dir(master_hex: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("master.key"), master_hex).unwrap();
    dir
}

async fn get(url: &str) -> Vec<u8> {
    reqwest::get(url)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn replicas_share_the_card_signing_keys() {
    let db = TestDb::new().await;
    let (a_dir, b_dir) = (data_dir(MASTER_HEX), data_dir(MASTER_HEX));
    let (a, stop_a) = build(&db, a_dir.path()).await.unwrap();
    let (b, stop_b) = build(&db, b_dir.path()).await.unwrap();
    let jwks_a = get(&format!("{a}/.well-known/jwks.json")).await;
    let jwks_b = get(&format!("{b}/.well-known/jwks.json")).await;
    assert_eq!(jwks_a, jwks_b, "one key ring");
    // The card of one replica verifies against the key set of the other.
    let card_b = get(&format!("{b}/.well-known/agent-card.json")).await;
    let jwks: Jwks = serde_json::from_slice(&jwks_a).unwrap();
    assert_eq!(jwks.keys.len(), 1);
    assert_eq!(verify_card(&card_b, &jwks), Ok(jwks.keys[0].kid.clone()));

    // A replica whose master key differs cannot open the ring, and says why.
    let other = data_dir(&"17".repeat(32));
    let err = build(&db, other.path()).await.unwrap_err();
    assert!(format!("{err:#}").contains("same master key"), "{err:#}");
    stop_a.cancel();
    stop_b.cancel();
}

#[tokio::test]
async fn an_earlier_key_file_is_adopted_so_the_key_id_stays() {
    let db = TestDb::new().await;
    let dir = data_dir(MASTER_HEX);
    let master = MasterKey::from_hex(MASTER_HEX).unwrap();
    let (_, record) = SigningKey::generate(&master).unwrap();
    std::fs::write(
        dir.path().join("signing-keys.json"),
        serde_json::to_vec(&[&record]).unwrap(),
    )
    .unwrap();
    let (url, stop) = build(&db, dir.path()).await.unwrap();
    let jwks: Jwks =
        serde_json::from_slice(&get(&format!("{url}/.well-known/jwks.json")).await).unwrap();
    assert_eq!(
        jwks.keys.iter().map(|k| k.kid.as_str()).collect::<Vec<_>>(),
        [record.kid.as_str()]
    );
    stop.cancel();
}
