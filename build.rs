//! Generates the A2A protobuf types, the tonic service and their ProtoJSON (serde) impls from
//! `proto/` into `OUT_DIR`. Uses the `protoc` named by `PROTOC`, else one on `PATH`, else the one
//! vendored by `protoc-bin-vendored` (so a machine without protoc still builds).
//!
//! Also sets `LIAISON_GIT_COMMIT` for `liaison --version`: the `LIAISON_GIT_COMMIT` environment
//! variable when set (the Docker build passes it, as its context has no `.git`), else `git
//! rev-parse --short HEAD`, else `unknown` (a source tarball, or no git installed).

use std::path::PathBuf;

/// Our `google.protobuf.Timestamp`, with A2A's JSON form.
const TIMESTAMP: &str = "crate::wire::wkt::Timestamp";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let descriptor_path = out_dir.join("a2a_descriptor.bin");

    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc()?);
    // Maps become BTreeMaps so every rendering (card JSON, ETag) is deterministic.
    config.btree_map(["."]);

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(false)
        .build_transport(false)
        // Undecodable requests become A2A errors, not INTERNAL (src/a2a/codec.rs).
        .codec_path("crate::wire::codec::A2aCodec")
        // Well-known types come from pbjson-types, which carries their ProtoJSON forms, except
        // Timestamp: A2A wants `Z` and milliseconds (see src/a2a/wkt.rs).
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .extern_path(".google.protobuf.Timestamp", TIMESTAMP)
        .file_descriptor_set_path(&descriptor_path)
        .compile_with_config(config, &["proto/a2a.proto"], &["proto"])?;

    let descriptors = std::fs::read(&descriptor_path)?;
    pbjson_build::Builder::new()
        .register_descriptors(&descriptors)?
        .extern_path(".google.protobuf", "::pbjson_types")
        .extern_path(".google.protobuf.Timestamp", TIMESTAMP)
        .btree_map(["."])
        // ProtoJSON readers ignore unknown fields (A2A DM-SERIAL-005).
        .ignore_unknown_fields()
        .build(&[".lf.a2a.v1"])?;

    println!("cargo:rerun-if-changed=proto");
    println!("cargo:rerun-if-env-changed=PROTOC");
    git_commit();
    Ok(())
}

/// Sets `LIAISON_GIT_COMMIT`, and asks to run again when the checked-out commit moves (only for
/// files that exist: a missing one would make Cargo run this script on every build).
fn git_commit() {
    println!("cargo:rerun-if-env-changed=LIAISON_GIT_COMMIT");
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git").args(args).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !text.is_empty()).then_some(text)
    };
    let commit = std::env::var("LIAISON_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LIAISON_GIT_COMMIT={commit}");
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name])
            && std::path::Path::new(&path).is_file()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}

/// Where protoc is: `PROTOC`, else `protoc` on `PATH`, else the vendored binary.
fn protoc() -> Result<PathBuf, Box<dyn std::error::Error>> {
    if let Some(path) = std::env::var_os("PROTOC") {
        return Ok(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("protoc"))
            .find(|candidate| candidate.is_file())
    });
    match on_path {
        Some(path) => Ok(path),
        None => Ok(protoc_bin_vendored::protoc_bin_path()?),
    }
}
