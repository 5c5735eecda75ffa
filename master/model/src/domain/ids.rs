//! Typed identifiers of the master's records: one UUID newtype per table, so an id of one kind
//! cannot be passed where another is wanted. How they are stored is `db`'s business.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_id {
    ($($(#[$meta:meta])* $name:ident;)+) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new random id.
            pub fn random() -> Self {
                Self(Uuid::new_v4())
            }

            pub fn as_uuid(self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(uuid: Uuid) -> Self {
                Self(uuid)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::try_parse(s).map(Self)
            }
        }

        impl TryFrom<String> for $name {
            type Error = uuid::Error;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl TryFrom<&str> for $name {
            type Error = uuid::Error;

            fn try_from(s: &str) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                uuid_schema()
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }
    )+};
}

uuid_id! {
    /// A user (`users.id`).
    UserId;
    /// A file or folder (`objects.id`).
    ObjectId;
    /// A storage policy (`policies.id`).
    PolicyId;
    /// A storage node (`nodes.id`).
    NodeId;
    /// A user group (`groups.id`).
    GroupId;
    /// An upload session (`upload_sessions.id`).
    UploadId;
}

/// The OpenAPI schema of every id: a UUID string.
fn uuid_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
    ObjectBuilder::new().schema_type(Type::String).format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid))).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "0195b9a2-7c1e-7d40-9a3b-5f2c8e1d4a60";

    #[test]
    fn an_id_round_trips_through_text_and_json() {
        let id: UserId = TEXT.parse().unwrap();
        assert_eq!(id.to_string(), TEXT);
        assert_eq!(UserId::try_from(TEXT.to_owned()).unwrap(), id);
        assert_eq!(serde_json::to_value(id).unwrap(), serde_json::json!(TEXT));
        assert_eq!(serde_json::from_value::<UserId>(serde_json::json!(TEXT)).unwrap(), id);
    }

    #[test]
    fn text_that_is_not_a_uuid_is_refused() {
        for bad in ["", "42", "not-a-uuid", "0195b9a2-7c1e-7d40-9a3b-5f2c8e1d4a6"] {
            assert!(bad.parse::<PolicyId>().is_err(), "{bad:?} accepted");
            assert!(GroupId::try_from(bad.to_owned()).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn ids_convert_to_and_from_uuids() {
        let uuid = Uuid::new_v4();
        assert_eq!(Uuid::from(NodeId::from(uuid)), uuid);
        assert_eq!(ObjectId::from(uuid).as_uuid(), uuid);
        assert_ne!(GroupId::random(), GroupId::random());
    }

    #[test]
    fn the_schema_is_a_uuid_string() {
        let schema = serde_json::to_value(<UserId as utoipa::PartialSchema>::schema()).unwrap();
        assert_eq!(schema, serde_json::json!({ "type": "string", "format": "uuid" }));
    }
}
