//! How domain values sit in columns: typed ids as UUID text, enumerations as their text, flags
//! as 0/1 integers, option documents as JSON text; for sqlx's `Any` driver and for decoders over
//! [`Values`]. A stored value that does not decode is a [`DbError`], never a panic.

use std::str::FromStr;

use sqlx::any::{Any, AnyTypeInfo, AnyValueRef};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Decode, Encode, Type};

use super::{DbError, Values};
use crate::domain::group::GroupPermissions;
use crate::domain::ids::{GroupId, NodeId, ObjectId, PolicyId, UploadId, UserId};
use crate::domain::node::NodeStatus;
use crate::domain::object::ObjectKind;
use crate::domain::report::{ReportAction, ReportReason};
use crate::domain::task::{TaskProgress, TaskProps, TaskStatus, TaskType};
use crate::domain::upload::UploadStatus;
use crate::domain::user::UserStatus;

/// Declares that a type is stored in a TEXT column (its encoding is the caller's).
macro_rules! stored_as_text {
    ($name:ty) => {
        impl Type<Any> for $name {
            fn type_info() -> AnyTypeInfo {
                <String as Type<Any>>::type_info()
            }

            fn compatible(ty: &AnyTypeInfo) -> bool {
                <String as Type<Any>>::compatible(ty)
            }
        }
    };
}

/// Stores a type as TEXT through its `Display` and reads it back through its `FromStr`.
macro_rules! text_column {
    ($($name:ty),+ $(,)?) => {$(
        stored_as_text!($name);

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

text_column!(UserId, ObjectId, PolicyId, NodeId, GroupId, UploadId);

/// Stores an enumeration as its `as_str` text and reads it back with `parse` (`Option`).
macro_rules! enum_column {
    ($($name:ty => $parse:expr),+ $(,)?) => {$(
        stored_as_text!($name);

        impl<'q> Encode<'q, Any> for $name {
            fn encode_by_ref(&self, buf: &mut <Any as sqlx::Database>::ArgumentBuffer<'q>) -> Result<IsNull, BoxDynError> {
                <&str as Encode<'q, Any>>::encode(self.as_str(), buf)
            }
        }

        impl<'r> Decode<'r, Any> for $name {
            fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
                let text = <String as Decode<'r, Any>>::decode(value)?;
                let parse: fn(&str) -> Option<$name> = $parse;
                parse(&text).ok_or_else(|| format!(concat!("{:?} is not a ", stringify!($name)), text).into())
            }
        }
    )+};
}

enum_column!(
    UserStatus => |text| text.parse().ok(),
    TaskStatus => TaskStatus::parse,
    TaskType => TaskType::parse,
    NodeStatus => NodeStatus::parse,
    ObjectKind => ObjectKind::parse,
    UploadStatus => UploadStatus::parse,
    ReportReason => ReportReason::parse,
    ReportAction => ReportAction::parse,
);

/// Stores a document as JSON text and reads it back with serde.
macro_rules! json_column {
    ($($name:ty),+ $(,)?) => {$(
        stored_as_text!($name);

        impl<'q> Encode<'q, Any> for $name {
            fn encode_by_ref(&self, buf: &mut <Any as sqlx::Database>::ArgumentBuffer<'q>) -> Result<IsNull, BoxDynError> {
                <String as Encode<'q, Any>>::encode(serde_json::to_string(self)?, buf)
            }
        }

        impl<'r> Decode<'r, Any> for $name {
            fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
                Ok(serde_json::from_str(&<String as Decode<'r, Any>>::decode(value)?)?)
            }
        }
    )+};
}

json_column!(GroupPermissions, TaskProps, TaskProgress, JsonDocument);

/// A column of JSON text read as a free-form document. Row structs keep a plain
/// `serde_json::Value`: `#[sqlx(try_from = "JsonDocument")]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct JsonDocument(pub serde_json::Value);

impl From<JsonDocument> for serde_json::Value {
    fn from(document: JsonDocument) -> Self {
        document.0
    }
}

/// A yes/no column, stored as 0 or 1 in both backends. Row structs keep a plain `bool` and
/// decode through it: `#[sqlx(try_from = "Flag")]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

impl From<Flag> for bool {
    fn from(flag: Flag) -> Self {
        flag.0
    }
}

impl Type<Any> for Flag {
    fn type_info() -> AnyTypeInfo {
        <i64 as Type<Any>>::type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        <i64 as Type<Any>>::compatible(ty) || <bool as Type<Any>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Any> for Flag {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        match <i64 as Decode<'r, Any>>::decode(value.clone()) {
            Ok(number) => Ok(Flag(number != 0)),
            Err(_) => Ok(Flag(<bool as Decode<'r, Any>>::decode(value)?)),
        }
    }
}

/// A yes/no column that may be NULL (not yet known): `#[sqlx(try_from = "OptionalFlag")]` on an
/// `Option<bool>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalFlag(pub Option<bool>);

impl From<OptionalFlag> for Option<bool> {
    fn from(flag: OptionalFlag) -> Self {
        flag.0
    }
}

impl Type<Any> for OptionalFlag {
    fn type_info() -> AnyTypeInfo {
        <Flag as Type<Any>>::type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        <Flag as Type<Any>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Any> for OptionalFlag {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        if sqlx::ValueRef::is_null(&value) {
            return Ok(OptionalFlag(None));
        }
        Ok(OptionalFlag(Some(<Flag as Decode<'r, Any>>::decode(value)?.0)))
    }
}

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

    /// A 0/1 column as a `bool`.
    pub fn flag(&self, column: &str) -> Result<bool, DbError> {
        Ok(self.int(column)? != 0)
    }

    /// [`Self::parsed`] for a column that may be NULL.
    pub fn opt_parsed<T>(&self, column: &str) -> Result<Option<T>, DbError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        self.opt_text(column)?.map(|text| parse_text(column, &text)).transpose()
    }

    /// [`Self::parsed`] by position, for rows decoded by position.
    pub fn parsed_at<T>(&self, index: usize) -> Result<T, DbError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        parse_text(&Position(index), &self.text_at(index)?)
    }

    /// [`Self::opt_parsed`] by position.
    pub fn opt_parsed_at<T>(&self, index: usize) -> Result<Option<T>, DbError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        self.opt_text_at(index)?.map(|text| parse_text(&Position(index), &text)).transpose()
    }
}

/// A column named by its position, as errors name it.
struct Position(usize);

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}", self.0)
    }
}

/// `column` names the column only when the text does not parse, so naming it costs nothing.
fn parse_text<T>(column: &(impl std::fmt::Display + ?Sized), text: &str) -> Result<T, DbError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    text.parse()
        .map_err(|error: T::Err| DbError::Invalid { column: column.to_string(), reason: format!("{text:?}: {error}") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;

    async fn sqlite() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db =
            Db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("columns-test").display()), 2).await.unwrap();
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

    #[derive(sqlx::FromRow)]
    struct Decoded {
        #[sqlx(try_from = "Flag")]
        enabled: bool,
        #[sqlx(try_from = "Flag")]
        disabled: bool,
        status: UserStatus,
        permissions: GroupPermissions,
    }

    #[tokio::test]
    async fn flags_enumerations_and_documents_decode_into_their_types() {
        let (_dir, db) = sqlite().await;
        let row: Decoded = sqlx::query_as(
            r#"SELECT 1 AS enabled, 0 AS disabled, 'BANNED' AS status, '{"share":true}' AS permissions"#,
        )
        .fetch_one(db.reader())
        .await
        .unwrap();
        assert!(row.enabled && !row.disabled);
        assert_eq!(row.status, UserStatus::Banned);
        // Flags stored before `share_save` existed: it is on, the others absent are off.
        let expected = GroupPermissions { share: true, share_save: true, ..GroupPermissions::default() };
        assert_eq!(row.permissions, expected);
        let (status, task): (UserStatus, TaskStatus) = sqlx::query_as("SELECT $1, $2")
            .bind(UserStatus::Inactive)
            .bind(TaskStatus::Canceled)
            .fetch_one(db.reader())
            .await
            .unwrap();
        assert_eq!((status, task), (UserStatus::Inactive, TaskStatus::Canceled));
        let bad: Result<Decoded, _> =
            sqlx::query_as("SELECT 1 AS enabled, 0 AS disabled, 'asleep' AS status, '{}' AS permissions")
                .fetch_one(db.reader())
                .await;
        assert!(bad.is_err());
        let bad: Result<Decoded, _> =
            sqlx::query_as("SELECT 1 AS enabled, 0 AS disabled, 'ACTIVE' AS status, 'x' AS permissions")
                .fetch_one(db.reader())
                .await;
        assert!(bad.is_err());
    }

    #[derive(sqlx::FromRow)]
    struct Maybe {
        #[sqlx(try_from = "OptionalFlag")]
        unknown: Option<bool>,
        #[sqlx(try_from = "OptionalFlag")]
        kept: Option<bool>,
        kind: ObjectKind,
        status: UploadStatus,
    }

    #[tokio::test]
    async fn a_null_flag_is_none_and_object_kinds_and_upload_states_decode() {
        let (_dir, db) = sqlite().await;
        let row: Maybe = sqlx::query_as("SELECT NULL AS unknown, 1 AS kept, 'folder' AS kind, 'finishing' AS status")
            .fetch_one(db.reader())
            .await
            .unwrap();
        assert_eq!((row.unknown, row.kept), (None, Some(true)));
        assert_eq!((row.kind, row.status), (ObjectKind::Folder, UploadStatus::Finishing));
        let bad: Result<(ObjectKind,), _> = sqlx::query_as("SELECT 'link'").fetch_one(db.reader()).await;
        assert!(bad.is_err());
    }

    #[tokio::test]
    async fn typed_reads_by_position_name_the_column_that_did_not_parse() {
        let (_dir, db) = sqlite().await;
        let id = ObjectId::random();
        let row = sqlx::query("SELECT $1, NULL, 'nope'").bind(id).fetch_one(db.reader()).await.unwrap();
        let values: &dyn Values = &row;
        assert_eq!(values.parsed_at::<ObjectId>(0).unwrap(), id);
        assert_eq!(values.opt_parsed_at::<PolicyId>(1).unwrap(), None);
        match values.parsed_at::<ObjectKind>(2) {
            Err(DbError::Invalid { column, .. }) => assert_eq!(column, "column 2"),
            other => panic!("{other:?}"),
        }
    }
}
