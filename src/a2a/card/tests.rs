//! Tests of the card: RFC 8785 vectors for the canonicaliser, card validation, signing and
//! verification.

use serde_json::{Value, json};

use super::*;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::sign::canonical_payload;
use crate::keys::jose::{VerifyError, verify_card};
use crate::keys::ring::{Jwks, KeyRing, MasterKey, SigningKey};

// ---- RFC 8785 (JCS) published vectors -------------------------------------------------------

/// RFC 8785 §3.2.2: the sample input, whitespace and escapes as printed in the RFC.
const RFC8785_SAMPLE_INPUT: &str = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;

/// RFC 8785 §3.2.3: the canonical output of the sample.
const RFC8785_SAMPLE_OUTPUT: &str = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";

/// RFC 8785 §3.2.4: the UTF-8 bytes of that output, in hex, as printed.
const RFC8785_SAMPLE_BYTES: &str = "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72 \
     75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a 5b 33 33 33 33 33 33 33 33 33 \
     2e 33 33 33 33 33 33 33 2c 31 65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37 \
     5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30 30 66 5c 6e 41 27 42 5c 22 5c \
     5c 5c 5c 5c 22 2f 22 7d";

/// RFC 8785 §3.2.3: property sorting by UTF-16 code units.
const RFC8785_SORTING_INPUT: &str = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;

const RFC8785_SORTING_OUTPUT: &str = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";

/// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical serialisation (the finite ones;
/// NaN and Infinity must be refused and are not JSON numbers anyway).
const RFC8785_NUMBERS: [(u64, &str); 24] = [
    (0x0000000000000000, "0"),
    (0x8000000000000000, "0"),
    (0x0000000000000001, "5e-324"),
    (0x8000000000000001, "-5e-324"),
    (0x7fefffffffffffff, "1.7976931348623157e+308"),
    (0xffefffffffffffff, "-1.7976931348623157e+308"),
    (0x4340000000000000, "9007199254740992"),
    (0xc340000000000000, "-9007199254740992"),
    (0x4430000000000000, "295147905179352830000"),
    (0x44b52d02c7e14af5, "9.999999999999997e+22"),
    (0x44b52d02c7e14af6, "1e+23"),
    (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
    (0x444b1ae4d6e2ef4e, "999999999999999700000"),
    (0x444b1ae4d6e2ef4f, "999999999999999900000"),
    (0x444b1ae4d6e2ef50, "1e+21"),
    (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
    (0x3eb0c6f7a0b5ed8d, "0.000001"),
    (0x41b3de4355555553, "333333333.3333332"),
    (0x41b3de4355555554, "333333333.33333325"),
    (0x41b3de4355555555, "333333333.3333333"),
    (0x41b3de4355555556, "333333333.3333334"),
    (0x41b3de4355555557, "333333333.33333343"),
    (0xbecbf647612f3696, "-0.0000033333333333333333"),
    (0x43143ff3c1cb0959, "1424953923781206.2"),
];

fn jcs(value: &Value) -> String {
    String::from_utf8(serde_json_canonicalizer::to_vec(value).unwrap()).unwrap()
}

#[test]
fn canonicalisation_matches_the_rfc_8785_sample() {
    let value: Value = serde_json::from_str(RFC8785_SAMPLE_INPUT).unwrap();
    let canonical = jcs(&value);
    assert_eq!(canonical, RFC8785_SAMPLE_OUTPUT);
    let hex: Vec<String> = canonical.bytes().map(|b| format!("{b:02x}")).collect();
    let expected: Vec<&str> = RFC8785_SAMPLE_BYTES.split_whitespace().collect();
    assert_eq!(hex, expected);
}

#[test]
fn canonicalisation_sorts_properties_by_utf16_code_units() {
    let value: Value = serde_json::from_str(RFC8785_SORTING_INPUT).unwrap();
    assert_eq!(jcs(&value), RFC8785_SORTING_OUTPUT);
}

#[test]
fn canonicalisation_serialises_numbers_as_rfc_8785_appendix_b() {
    for (bits, expected) in RFC8785_NUMBERS {
        let number = f64::from_bits(bits);
        assert_eq!(jcs(&json!(number)), expected, "0x{bits:016x}");
    }
}

// ---- The card ---------------------------------------------------------------------------------

const CARD: &str = include_str!("../../../agent-card/card.toml");

fn master() -> MasterKey {
    MasterKey::from_hex(&"42".repeat(32)).unwrap()
}

fn ring_of(count: usize) -> (KeyRing, Vec<crate::keys::ring::SealedKey>) {
    let mut records = Vec::new();
    for index in 0..count {
        let (_, mut record) = SigningKey::generate(&master()).unwrap();
        record.created_at = format!("2026-0{}-01T00:00:00Z", index + 1);
        records.push(record);
    }
    (KeyRing::open(&records, &master()).unwrap(), records)
}

fn endpoints() -> Endpoints {
    Endpoints::standard(
        "https://liaison.example/",
        Some("liaison.example:443".into()),
    )
}

fn signed() -> (SignedCard, KeyRing) {
    let definition = CardDefinition::from_toml(CARD).unwrap();
    let (ring, _) = ring_of(1);
    (
        SignedCard::sign(&definition, &endpoints(), &ring).unwrap(),
        ring,
    )
}

fn card_value(card: &SignedCard) -> Value {
    serde_json::from_slice(card.json()).unwrap()
}

#[test]
fn shipped_card_lists_every_binding_at_the_public_url() {
    let (card, _) = signed();
    let value = card_value(&card);
    assert_eq!(value["name"], "liaison");
    assert_eq!(
        value["supportedInterfaces"],
        json!([
            {"url": "https://liaison.example/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://liaison.example/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": "liaison.example:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        ])
    );
    assert_eq!(
        value["capabilities"]["extensions"][0]["uri"],
        crate::domain::ENVELOPE_EXTENSION
    );
    let mut capabilities = value["capabilities"].clone();
    capabilities.as_object_mut().unwrap().remove("extensions");
    assert_eq!(
        capabilities,
        json!({"streaming": true, "pushNotifications": true, "extendedAgentCard": true})
    );
    assert_eq!(
        value["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert_eq!(
        value["securityRequirements"],
        json!([{"schemes": {"bearer": {"list": ["agent"]}}}])
    );
    let skills: Vec<&str> = value["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|skill| skill["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills, ["ask", "request-change", "chat", "handoff"]);
}

#[test]
fn shipped_card_routes_skills_to_channels() {
    let definition = CardDefinition::from_toml(CARD).unwrap();
    assert_eq!(definition.default_skill(), "ask");
    let route = definition.route("request-change").unwrap();
    assert_eq!(route.channel.as_str(), "partners");
    assert_eq!(route.kind, Kind::Request);
    assert_eq!(route.impact, Some(Impact::Code));
    assert_eq!(definition.route("ask").unwrap().impact, None);
    assert!(definition.route("nope").is_none());
}

#[test]
fn signature_has_the_spec_protected_header() {
    let (card, ring) = signed();
    let value = card_value(&card);
    let signatures = value["signatures"].as_array().unwrap();
    assert_eq!(signatures.len(), 1);
    let protected = URL_SAFE_NO_PAD
        .decode(signatures[0]["protected"].as_str().unwrap())
        .unwrap();
    let header: Value = serde_json::from_slice(&protected).unwrap();
    assert_eq!(
        header,
        json!({
            "alg": "ES256",
            "kid": ring.signer().kid(),
            "typ": "JOSE",
            "jku": "https://liaison.example/.well-known/jwks.json",
        })
    );
    let signature = URL_SAFE_NO_PAD
        .decode(signatures[0]["signature"].as_str().unwrap())
        .unwrap();
    assert_eq!(signature.len(), 64);
}

#[test]
fn signed_card_verifies_against_the_published_jwks() {
    let (card, ring) = signed();
    let jwks: Jwks = serde_json::from_slice(card.jwks_json()).unwrap();
    assert_eq!(
        verify_card(card.json(), &jwks),
        Ok(ring.signer().kid().to_owned())
    );
}

#[test]
fn signature_covers_the_jcs_form_of_the_card_without_signatures() {
    // Rebuild the JWS signing input by hand from the served JSON, the way a client does.
    let (card, ring) = signed();
    let mut value = card_value(&card);
    let signature = value["signatures"][0].clone();
    value.as_object_mut().unwrap().remove("signatures");
    let payload = URL_SAFE_NO_PAD.encode(jcs(&value));
    let input = format!("{}.{payload}", signature["protected"].as_str().unwrap());
    let raw = URL_SAFE_NO_PAD
        .decode(signature["signature"].as_str().unwrap())
        .unwrap();
    assert!(
        ring.signer()
            .public_jwk()
            .verify_es256(input.as_bytes(), &raw)
    );
}

#[test]
fn tampered_card_fails_verification() {
    let (card, _) = signed();
    let jwks: Jwks = serde_json::from_slice(card.jwks_json()).unwrap();
    let tamperings: [fn(&mut Value); 5] = [
        |card| card["name"] = json!("mallory"),
        |card| card["supportedInterfaces"][0]["url"] = json!("https://evil.example/a2a/jsonrpc"),
        |card| card["capabilities"]["pushNotifications"] = json!(false),
        |card| {
            card["skills"]
                .as_array_mut()
                .unwrap()
                .pop()
                .map(drop)
                .unwrap_or(())
        },
        |card| {
            card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] = json!("Basic")
        },
    ];
    for tamper in tamperings {
        let mut value = card_value(&card);
        tamper(&mut value);
        let bytes = serde_json::to_vec(&value).unwrap();
        assert_eq!(
            verify_card(&bytes, &jwks),
            Err(VerifyError::NoValidSignature),
            "{value}"
        );
    }
}

#[test]
fn signature_from_an_unknown_key_is_refused() {
    let (card, _) = signed();
    let (other, _) = ring_of(1);
    assert_eq!(
        verify_card(card.json(), &other.jwks()),
        Err(VerifyError::NoValidSignature)
    );
}

#[test]
fn unsigned_card_is_refused() {
    let (card, _) = signed();
    let jwks: Jwks = serde_json::from_slice(card.jwks_json()).unwrap();
    let mut value = card_value(&card);
    value.as_object_mut().unwrap().remove("signatures");
    let bytes = serde_json::to_vec(&value).unwrap();
    assert_eq!(verify_card(&bytes, &jwks), Err(VerifyError::Unsigned));
    assert_eq!(verify_card(b"not json", &jwks), Err(VerifyError::Malformed));
}

#[test]
fn member_order_and_whitespace_do_not_matter_to_verification() {
    let (card, _) = signed();
    let jwks: Jwks = serde_json::from_slice(card.jwks_json()).unwrap();
    let value = card_value(&card);
    let pretty = serde_json::to_vec_pretty(&value).unwrap();
    assert!(verify_card(&pretty, &jwks).is_ok());
}

#[test]
fn every_key_of_the_ring_signs_for_the_rotation_overlap() {
    let definition = CardDefinition::from_toml(CARD).unwrap();
    let (ring, records) = ring_of(2);
    let card = SignedCard::sign(&definition, &endpoints(), &ring).unwrap();
    assert_eq!(card_value(&card)["signatures"].as_array().unwrap().len(), 2);
    // A client that only knows the older key still verifies.
    let older = KeyRing::open(&records[..1], &master()).unwrap();
    assert_eq!(
        verify_card(card.json(), &older.jwks()),
        Ok(records[0].kid.clone())
    );
}

#[test]
fn etag_is_stable_across_signings_and_changes_with_content() {
    let definition = CardDefinition::from_toml(CARD).unwrap();
    let (ring, _) = ring_of(1);
    let first = SignedCard::sign(&definition, &endpoints(), &ring).unwrap();
    let second = SignedCard::sign(&definition, &endpoints(), &ring).unwrap();
    assert_ne!(
        first.json(),
        second.json(),
        "ECDSA signatures are randomised"
    );
    assert_eq!(first.etag(), second.etag());
    assert!(first.etag().starts_with("W/\""));
    let moved = Endpoints::standard("https://elsewhere.example", None);
    let third = SignedCard::sign(&definition, &moved, &ring).unwrap();
    assert_ne!(first.etag(), third.etag());
}

#[test]
fn optional_capabilities_set_to_false_are_kept_in_the_payload() {
    // Proto presence: `optional bool` set to false is emitted, so it is signed.
    let definition = CardDefinition::from_toml(
        &CARD.replace("push_notifications = true", "push_notifications = false"),
    )
    .unwrap();
    let card = SignedCard::sign(&definition, &endpoints(), &ring_of(1).0).unwrap();
    let mut unsigned = card.card.clone();
    unsigned.signatures.clear();
    let payload = String::from_utf8(canonical_payload(&unsigned).unwrap()).unwrap();
    assert!(
        payload.contains(r#""pushNotifications":false"#),
        "{payload}"
    );
    assert!(!payload.contains("signatures"));
    assert!(
        !payload.contains("tenant"),
        "default-valued fields are omitted: {payload}"
    );
}

#[test]
fn extended_card_lists_only_the_given_skills() {
    let definition = CardDefinition::from_toml(CARD).unwrap();
    let card = definition.to_proto(&endpoints(), Some(&["handoff"]));
    let ids: Vec<&str> = card.skills.iter().map(|skill| skill.id.as_str()).collect();
    assert_eq!(ids, ["handoff"]);
}

#[test]
fn a_signed_extended_card_verifies_and_lists_only_the_given_skills() {
    let definition = CardDefinition::from_toml(CARD).unwrap();
    let (ring, records) = ring_of(1);
    let jwks = ring.jwks();
    let signer = CardSigner::new(definition, endpoints(), ring);
    assert!(signer.offers_extended_card());
    let card = signer.extended(&["ask", "no-such-skill"]).unwrap();
    let ids: Vec<&str> = card.skills.iter().map(|skill| skill.id.as_str()).collect();
    assert_eq!(ids, ["ask"]);
    let json = serde_json::to_vec(&card).unwrap();
    assert_eq!(verify_card(&json, &jwks), Ok(records[0].kid.clone()));
    // The public card from the same signer lists every skill.
    let public = card_value(&signer.public().unwrap());
    assert_eq!(public["skills"].as_array().unwrap().len(), 4);
    // A card that does not offer it says so.
    let closed = CardDefinition::from_toml(
        &CARD.replace("extended_agent_card = true", "extended_agent_card = false"),
    )
    .unwrap();
    let (ring, _) = ring_of(1);
    assert!(!CardSigner::new(closed, endpoints(), ring).offers_extended_card());
}

#[test]
fn authority_of_makes_the_port_explicit() {
    assert_eq!(
        Endpoints::authority_of("https://a.example/x"),
        Some("a.example:443".into())
    );
    assert_eq!(
        Endpoints::authority_of("http://127.0.0.1:8080"),
        Some("127.0.0.1:8080".into())
    );
    assert_eq!(
        Endpoints::authority_of("http://[::1]/"),
        Some("[::1]:80".into())
    );
    assert_eq!(
        Endpoints::authority_of("http://[::1]:9/"),
        Some("[::1]:9".into())
    );
    assert_eq!(Endpoints::authority_of("nonsense"), None);
}

// ---- Validation of agent-card/ --------------------------------------------------------------

fn card_with(from: &str, to: &str) -> Result<CardDefinition, CardError> {
    assert!(CARD.contains(from), "fixture drifted: {from}");
    CardDefinition::from_toml(&CARD.replacen(from, to, 1))
}

#[test]
fn invalid_cards_are_refused_with_a_reason() {
    let cases = [
        (
            r#"default_skill = "ask""#,
            r#"default_skill = "nope""#,
            "default_skill",
        ),
        (
            r#"name = "liaison""#,
            r#"name = """#,
            "name must not be empty",
        ),
        (
            r#"name = "liaison""#,
            "name = \"liaison\u{e9}\"",
            "must be ASCII",
        ),
        (
            r#"kind = "question""#,
            r#"kind = "reply""#,
            "must open a thread",
        ),
        (
            r#"kind = "question""#,
            r#"kind = "question", impact = "code""#,
            "only a request",
        ),
        (r#"kind = "question""#, r#"kind = "gossip""#, "kind"),
        (
            r#"channel = "partners""#,
            r#"channel = "Not A Slug""#,
            "channel",
        ),
        (r#"id = "handoff""#, r#"id = "ask""#, "appears twice"),
        (r#"tags = ["handoff"]"#, "tags = []", "at least one tag"),
        (
            r#"tags = ["handoff"]"#,
            r#"tags = [""]"#,
            "must not be empty",
        ),
        ("bearer = true", "bearer = false", "security must allow"),
        ("[capabilities]", "[capabilities]\nsurprise = 1", "surprise"),
    ];
    for (from, to, why) in cases {
        let error = card_with(from, to).expect_err(to).to_string();
        assert!(error.contains(why), "{to}: {error}");
    }
}

#[test]
fn oidc_scheme_is_listed_when_configured() {
    let definition = card_with(
        "# openid_connect_url = \"https://issuer.example/.well-known/openid-configuration\"",
        "openid_connect_url = \"https://issuer.example/.well-known/openid-configuration\"",
    )
    .unwrap();
    assert!(definition.accepts_oidc());
    let card = definition.to_proto(&endpoints(), None);
    let value = serde_json::to_value(&card).unwrap();
    assert_eq!(
        value["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"],
        "https://issuer.example/.well-known/openid-configuration"
    );
    assert_eq!(value["securityRequirements"].as_array().unwrap().len(), 2);
}

#[test]
fn skill_routes_feed_the_service_settings() {
    let definition = CardDefinition::from_toml(CARD).unwrap();
    let routes = definition.skill_routes();
    let ids: Vec<&str> = routes.iter().map(|route| route.id.as_str()).collect();
    assert_eq!(ids, ["ask", "request-change", "chat", "handoff"]);
    assert_eq!(routes[1].kind, Kind::Request);
    assert_eq!(routes[1].impact, Some(Impact::Code));
    assert_eq!(routes[2].channel.as_str(), "partners");
}
