//! What the store is given ([`input`]) and what it answers ([`records`]), and how a row of its
//! tables becomes a record (each record's column list and parser sit beside it). Plain data and
//! parsing: it must not depend on any file of the store but `db` (rows) and `error`; the
//! transactions (`tx`) and the operations (`impl Store`) depend on it, never the reverse.

pub(in crate::store) mod input;
pub(in crate::store) mod records;
