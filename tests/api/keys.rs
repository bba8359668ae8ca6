//! Key rotation (SPEC §10) through `/admin/v1/keys` on real servers: after `rotate` the new key
//! signs and the previous one co-signs the card and stays in the JWKS; `retire` drops it and a
//! card it alone signed no longer verifies; the signing key cannot be retired. On PostgreSQL a
//! second replica re-signs its card as soon as the first rotates (the bus tells it).

use std::path::Path;
use std::time::Duration;

use liaison::app::App;
use liaison::config::{Config, Overrides};
use liaison::keys::jose::verify_card;
use liaison::keys::ring::Jwks;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::helpers::TestDb;

const MASTER_HEX: &str = "6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b";

async fn build(db: &TestDb, dir: &Path) -> (String, CancellationToken) {
    std::fs::write(dir.join("master.key"), MASTER_HEX).unwrap();
    let overrides = Overrides {
        data_dir: Some(dir.to_path_buf()),
        listen: Some("127.0.0.1:0".into()),
        database_url: Some(db.url.clone()),
        ..Default::default()
    };
    let stop = CancellationToken::new();
    let app = App::build(Config::load(&overrides, []).unwrap(), stop.clone())
        .await
        .unwrap();
    let url = app.public_url().to_owned();
    tokio::spawn(app.run_until_stopped());
    (url, stop)
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

async fn card_and_jwks(base: &str) -> (Vec<u8>, Jwks) {
    let card = get(&format!("{base}/.well-known/agent-card.json")).await;
    let jwks =
        serde_json::from_slice(&get(&format!("{base}/.well-known/jwks.json")).await).unwrap();
    (card, jwks)
}

fn signature_kids(card: &[u8]) -> Vec<String> {
    let card: Value = serde_json::from_slice(card).unwrap();
    card["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let header = base64::Engine::decode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                s["protected"].as_str().unwrap(),
            )
            .unwrap();
            serde_json::from_slice::<Value>(&header).unwrap()["kid"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

async fn admin(base: &str, token: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let request = match body {
        Some(b) => client.post(format!("{base}{path}")).json(&b),
        None if path.ends_with("/keys") => client.get(format!("{base}{path}")),
        None => client.post(format!("{base}{path}")),
    };
    let response = request.bearer_auth(token).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn keys_rotate_co_sign_during_the_overlap_and_retire_on_every_replica() {
    let db = TestDb::new().await;
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, stop_a) = build(&db, a_dir.path()).await;
    let token = std::fs::read_to_string(a_dir.path().join("admin.token")).unwrap();
    let token = token.trim();
    // Replicas on SQLite do not share a bus; only PostgreSQL runs a second one.
    let replica = if db.is_postgres() {
        Some(build(&db, b_dir.path()).await)
    } else {
        None
    };

    let (before, jwks) = card_and_jwks(&a).await;
    let first = verify_card(&before, &jwks).unwrap();
    assert_eq!(signature_kids(&before), vec![first.clone()]);

    let (status, rotated) = admin(
        &a,
        token,
        "/admin/v1/keys/rotate",
        Some(serde_json::json!({})),
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    let second = rotated["rotated_to"]["kid"].as_str().unwrap().to_owned();
    assert_ne!(first, second);
    let (status, listed) = admin(&a, token, "/admin/v1/keys", None).await;
    assert_eq!(status, 200);
    let keys = listed["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0]["kid"], second.as_str());
    assert_eq!(keys[0]["signing"], true);
    assert!(keys[1]["retire_after"].is_string(), "{listed}");

    // During the overlap: both sign the card, both are in the JWKS; a client holding the old key
    // set still verifies the new card.
    let (during, jwks) = card_and_jwks(&a).await;
    let mut kids = signature_kids(&during);
    kids.sort();
    let mut expected = vec![first.clone(), second.clone()];
    expected.sort();
    assert_eq!(kids, expected);
    assert_eq!(jwks.keys.len(), 2);
    assert!(verify_card(&during, &jwks).is_ok());
    let old_jwks = Jwks {
        keys: vec![jwks.find(&first).unwrap().clone()],
    };
    assert_eq!(verify_card(&during, &old_jwks), Ok(first.clone()));
    if let Some((b, _)) = &replica {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (card_b, _) = card_and_jwks(b).await;
            if signature_kids(&card_b).len() == 2 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "replica b did not re-sign"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // The signing key cannot be retired; an unknown kid is not found; nothing changes.
    let (status, _) = admin(&a, token, &format!("/admin/v1/keys/{second}/retire"), None).await;
    assert_eq!(status, 400);
    let (status, _) = admin(&a, token, "/admin/v1/keys/nope/retire", None).await;
    assert_eq!(status, 404);
    let (status, _) = admin(
        &a,
        token,
        "/admin/v1/keys/rotate",
        Some(serde_json::json!({"overlap_s": -1})),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(signature_kids(&card_and_jwks(&a).await.0).len(), 2);

    // After retiring the old key: only the new one signs and is published; the card the old key
    // alone signed no longer verifies against the key set.
    let (status, _) = admin(&a, token, &format!("/admin/v1/keys/{first}/retire"), None).await;
    assert_eq!(status, 200);
    let (after, jwks) = card_and_jwks(&a).await;
    assert_eq!(signature_kids(&after), vec![second.clone()]);
    assert_eq!(verify_card(&after, &jwks), Ok(second.clone()));
    assert!(verify_card(&before, &jwks).is_err());
    // The list still shows it, apart: retired early, and until when it stays listed.
    let (status, listed) = admin(&a, token, "/admin/v1/keys", None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["keys"].as_array().map(Vec::len), Some(1), "{listed}");
    let retired = &listed["retired"];
    assert_eq!(retired.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(retired[0]["kid"], first.as_str());
    assert_eq!(retired[0]["early"], true);
    assert!(retired[0]["listed_until"].is_string(), "{listed}");
    if let Some((b, stop_b)) = replica {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (card_b, jwks_b) = card_and_jwks(&b).await;
            if signature_kids(&card_b) == [second.clone()] && jwks_b.keys.len() == 1 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "replica b did not drop the retired key"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop_b.cancel();
    }
    // Agents without the admin scope are refused.
    let (status, _) = admin(&a, "not-a-token", "/admin/v1/keys", None).await;
    assert_eq!(status, 401);
    stop_a.cancel();
}
