//! How domain values sit in columns: typed ids as UUID text, for sqlx's `Any` driver and for
//! decoders over [`Values`]. A stored value that does not decode is a [`DbError`], never a panic.

use std::str::FromStr;

use sqlx::any::{Any, AnyTypeInfo, AnyValueRef};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Decode, Encode, Type};

use super::{DbError, Values};
use crate::domain::ids::{GroupId, NodeId, ObjectId, PolicyId, UserId};

/// Stores a type as TEXT through its `Display` and reads it back through its `FromStr`.
macro_rules! text_column {
    ($($name:ty),+ $(,)?) => {$(
        impl Type<Any> for $name {
            fn type_info() -> AnyTypeInfo {
                <String as Type<Any>>::type_info()
            }

            fn compatible(ty: &AnyTypeInfo) -> bool {
                <String as Type<Any>>::compatible(ty)
            }
        }

        impl<'q> Encode<'q, Any> for $name {
            fn encode_by_ref(&self, buf: &mut <Any as sqlx::Database>::ArgumentBuffer<'q>) -> Result<IsNull, BoxDynError> {
                <String as Encode<'q, Any>>::encode(self.to_string(), buf)
            }
        }

        impl<'r> Decode<'r, Any> for $name {
            fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
                let text = <String as Decode<'r, Any>>::decode(value)?;
                text.parse::<$name>().map_err(|error| format!("{text:?}: {error}").into())
            }
        }
    )+};
}

text_column!(UserId, ObjectId, PolicyId, NodeId, GroupId);

/// Typed reads for decoders written over [`Values`].
impl dyn Values + '_ {
    /// The text of `column` parsed as `T` (an id, an enumeration).
    pub fn parsed<T>(&self, column: &str) -> Result<T, DbError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        parse_text(column, &self.text(column)?)
    }

    /// [`Self::parsed`] for a column that may be NULL.
    pub fn opt_parsed<T>(&self, column: &str) -> Result<Option<T>, DbError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        self.opt_text(column)?.map(|text| parse_text(column, &text)).transpose()
    }
}

fn parse_text<T>(column: &str, text: &str) -> Result<T, DbError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    text.parse()
        .map_err(|error: T::Err| DbError::Invalid { column: column.to_owned(), reason: format!("{text:?}: {error}") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;

    async fn sqlite() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("columns-test").display()), 2).await.unwrap();
        (dir, db)
    }

    #[tokio::test]
    async fn an_id_is_bound_and_read_back_as_uuid_text() {
        let (_dir, db) = sqlite().await;
        let id = UserId::random();
        let (text, back, none): (String, UserId, Option<GroupId>) =
            sqlx::query_as("SELECT $1, $1, NULL").bind(id).fetch_one(db.reader()).await.unwrap();
        assert_eq!((text, back, none), (id.to_string(), id, None));
    }

    #[tokio::test]
    async fn a_stored_id_that_is_not_a_uuid_is_an_error() {
        let (_dir, db) = sqlite().await;
        let read: Result<(PolicyId,), _> = sqlx::query_as("SELECT 'nope'").fetch_one(db.reader()).await;
        assert!(read.is_err());
        let row = sqlx::query("SELECT 'nope' AS id").fetch_one(db.reader()).await.unwrap();
        let values: &dyn Values = &row;
        assert!(matches!(values.parsed::<NodeId>("id"), Err(DbError::Invalid { .. })));
        assert_eq!(values.opt_parsed::<NodeId>("missing").ok(), None, "an unknown column is an error too");
    }
}
