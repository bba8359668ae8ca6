//! Rows as the rest of the program sees them, already parsed into domain types: one file per part
//! of the store, each with the column lists and parsers of its rows. It must not depend on any file
//! of the store but `db` (rows) and `error`, nor on the inputs.

pub(in crate::store) mod approvals;
pub(in crate::store) mod coordination;
pub(in crate::store) mod directory;
pub(in crate::store) mod inbox;
pub(in crate::store) mod links;
pub(in crate::store) mod oauth;
pub(in crate::store) mod outbox;
pub(in crate::store) mod personal;
pub(in crate::store) mod remote_tasks;
pub(in crate::store) mod remotes;
pub(in crate::store) mod threads;
pub(in crate::store) mod tool_checks;
