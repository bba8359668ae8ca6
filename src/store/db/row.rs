//! A row read from either backend, and how a column of it decodes into a Rust value. It must not
//! depend on any other file of the store but [`crate::store::error`].

use std::sync::Arc;

use rusqlite::types::Value as LiteValue;
use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::store::error::{Result, StoreError};

/// A row read from either backend.
pub(crate) enum Row {
    Pg(AnyRow),
    Lite(LiteRow),
}

pub(crate) struct LiteRow {
    pub(super) columns: Arc<[String]>,
    pub(super) values: Vec<LiteValue>,
}

/// A column, by name or by position.
pub(crate) enum Column<'a> {
    Name(&'a str),
    Index(usize),
}

impl<'a> From<&'a str> for Column<'a> {
    fn from(name: &'a str) -> Self {
        Column::Name(name)
    }
}

impl From<usize> for Column<'_> {
    fn from(i: usize) -> Self {
        Column::Index(i)
    }
}

impl Row {
    /// The value of one column, decoded as `T`.
    pub(crate) fn try_get<'a, T: Decode, I: Into<Column<'a>>>(&self, column: I) -> Result<T> {
        let column = column.into();
        match self {
            Row::Pg(row) => T::from_any(row, &column).map_err(StoreError::from),
            Row::Lite(row) => {
                let i = match column {
                    Column::Index(i) => i,
                    Column::Name(name) => {
                        row.columns.iter().position(|c| c == name).ok_or_else(|| {
                            StoreError::Database(format!("no column {name:?} in the row"))
                        })?
                    }
                };
                let value = row
                    .values
                    .get(i)
                    .ok_or_else(|| StoreError::Database(format!("no column {i} in the row")))?;
                T::from_lite(value).ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "column {:?} holds {value:?}, not {}",
                        row.columns[i],
                        std::any::type_name::<T>()
                    ))
                })
            }
        }
    }
}

/// A type a column decodes to, on both backends.
pub(crate) trait Decode: Sized {
    fn from_any(row: &AnyRow, column: &Column<'_>) -> std::result::Result<Self, sqlx::Error>;
    /// `None` when the value is not of this type.
    fn from_lite(value: &LiteValue) -> Option<Self>;
}

macro_rules! decode {
    ($($t:ty => $pat:pat => $out:expr;)*) => {$(
        impl Decode for $t {
            fn from_any(row: &AnyRow, column: &Column<'_>) -> std::result::Result<Self, sqlx::Error> {
                match column {
                    Column::Name(name) => row.try_get::<$t, _>(*name),
                    Column::Index(i) => row.try_get::<$t, _>(*i),
                }
            }
            fn from_lite(value: &LiteValue) -> Option<Self> {
                match value {
                    $pat => Some($out),
                    _ => None,
                }
            }
        }
        impl Decode for Option<$t> {
            fn from_any(row: &AnyRow, column: &Column<'_>) -> std::result::Result<Self, sqlx::Error> {
                match column {
                    Column::Name(name) => row.try_get::<Option<$t>, _>(*name),
                    Column::Index(i) => row.try_get::<Option<$t>, _>(*i),
                }
            }
            fn from_lite(value: &LiteValue) -> Option<Self> {
                match value {
                    LiteValue::Null => Some(None),
                    $pat => Some(Some($out)),
                    _ => None,
                }
            }
        }
    )*};
}

decode! {
    i64 => LiteValue::Integer(i) => *i;
    String => LiteValue::Text(s) => s.clone();
}
