//! The statement a caller writes once for both backends: [`query`]`(sql).bind(v)…`, the values
//! it binds, and what running it answers ([`Done`], or rows). It only builds: running is the
//! executors' business ([`super`], [`super::lite`]). It must not depend on any other file of the
//! store but [`super::row`] (the rows an answer holds).

use std::borrow::Cow;

use super::row::Row;

/// A statement and the values bound to its `$n` parameters, in order.
pub(crate) struct Query {
    pub(super) sql: Cow<'static, str>,
    pub(super) args: Vec<Value>,
}

/// A bound value. Each carries its type even when null: PostgreSQL types its parameters.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Int(Option<i64>),
    Text(Option<Cow<'static, str>>),
}

/// Starts a statement; bind its parameters in order with [`Query::bind`].
pub(crate) fn query(sql: impl Into<Cow<'static, str>>) -> Query {
    Query {
        sql: sql.into(),
        args: Vec::new(),
    }
}

/// What a statement's execution changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    pub(super) rows_affected: u64,
}

impl Done {
    /// Rows inserted, updated or deleted (on SQLite, by every statement of the call).
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows_affected
    }
}

/// How much of a statement's result the caller wants.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    Nothing,
    First,
    All,
}

pub(crate) enum Output {
    Done(Done),
    Rows(Vec<Row>),
}

impl Query {
    pub(crate) fn bind(mut self, value: impl Into<Value>) -> Self {
        self.args.push(value.into());
        self
    }
}

macro_rules! value_from {
    ($($t:ty => $variant:ident, $conv:expr;)*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::$variant(Some($conv(v)))
            }
        }
        impl From<Option<$t>> for Value {
            fn from(v: Option<$t>) -> Value {
                Value::$variant(v.map($conv))
            }
        }
    )*};
}

value_from! {
    i64 => Int, |v| v;
    String => Text, Cow::Owned;
    &'static str => Text, Cow::Borrowed;
}
