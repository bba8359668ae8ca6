//! The integration suite: one binary, run against SQLite by default and against PostgreSQL when
//! `LIAISON_TEST_DATABASE_URL` points at a server (each test then gets a fresh database).

#![allow(clippy::disallowed_methods)] // a client of the server under test

mod helpers;

mod activity;
mod admin_http;
mod approvals;
mod audit;
mod bearer;
mod claim_wait;
mod claims;
mod cli_docs;
mod connections;
mod console;
mod coordination;
mod credential_end;
mod direct_answers;
mod directory;
mod durability;
mod hostile_input;
mod inbox;
mod keys;
mod layers;
mod logging;
mod oauth;
mod outbox;
mod outbox_durability;
mod own_agents;
mod posting;
mod reference;
mod remotes;
mod replicas;
mod resources;
mod retention;
mod sessions;
mod tasks;
mod tool_checks;
mod tool_confirm_paths;
mod webhooks;
mod workspace;
