//! Object metadata (key-value pairs in namespaces) and the caller's custom property
//! definitions. Namespaces: `sys` is written by Nubo only (read-only to users), `user` holds
//! free-form pairs, `props` holds values of the owner's custom properties, checked against
//! their definitions, `dav` holds dead WebDAV properties.

use crate::context::Context;
use nubo_model::db::properties::PropertyRow;
use nubo_model::db::{self, DbError};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::{self, Readable, Writable};
use crate::tree::files;

pub const SYSTEM_NAMESPACE: &str = "sys";
pub const USER_NAMESPACE: &str = "user";
pub const PROPERTY_NAMESPACE: &str = "props";
/// Dead WebDAV properties (`PROPPATCH`): the name is `{namespace-uri}local-name`, the value the
/// property's XML element. Written through WebDAV only.
pub const DAV_NAMESPACE: &str = "dav";
const MAX_DAV_NAME_BYTES: usize = 512;
const MAX_KEY_BYTES: usize = 128;
const MAX_VALUE_BYTES: usize = 4096;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MetadataEntry {
    pub namespace: String,
    pub name: String,
    pub value: String,
}

/// One change: set `value`, or remove the pair when `value` is null.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MetadataChange {
    pub namespace: String,
    pub name: String,
    pub value: Option<String>,
}

pub async fn get(ctx: &Context, object: &Readable) -> ServiceResult<Vec<MetadataEntry>> {
    let db = ctx.db();
    Ok(db::objects::metadata(db, object.row().id)
        .await?
        .into_iter()
        .map(|(namespace, name, value)| MetadataEntry { namespace, name, value })
        .collect())
}

/// Applies changes to a live object ([`access::Reach::Live`]) all together, or none when one is
/// refused. `props` values are checked against the object owner's property definitions.
pub async fn patch(ctx: &Context, object: &Writable, changes: &[MetadataChange]) -> ServiceResult<Vec<MetadataEntry>> {
    let db = ctx.db();
    let owner_id = object.row().owner_id;
    for change in changes {
        if change.name.is_empty() || change.name.len() > MAX_KEY_BYTES || change.name.chars().any(char::is_control) {
            return Err(ServiceError::validation(
                "name",
                "metadata names are 1 to 128 bytes without control characters",
            ));
        }
        if change.value.as_ref().is_some_and(|v| v.len() > MAX_VALUE_BYTES) {
            return Err(ServiceError::validation("value", "metadata values are at most 4096 bytes"));
        }
        match change.namespace.as_str() {
            USER_NAMESPACE => {}
            SYSTEM_NAMESPACE => {
                return Err(ServiceError::new(
                    ErrorKind::Forbidden,
                    codes::METADATA_READ_ONLY,
                    "the sys namespace is read-only",
                ));
            }
            PROPERTY_NAMESPACE => {
                let definition = db::properties::find_by_name(db, owner_id, &change.name).await?.ok_or_else(|| {
                    ServiceError::validation("name", format!("no custom property named {:?}", change.name))
                })?;
                if let Some(value) = &change.value {
                    check_value(&definition, value)?;
                }
            }
            other => {
                return Err(ServiceError::validation(
                    "namespace",
                    format!("unknown namespace {other:?}: use user or props"),
                ));
            }
        }
    }
    let mut tx = db.begin().await?;
    for change in changes {
        db::objects::set_metadata(&mut tx, object.row().id, &change.namespace, &change.name, change.value.as_deref())
            .await?;
    }
    tx.commit().await.map_err(DbError::from)?;
    get(ctx, object.as_readable()).await
}

/// A dead WebDAV property: its `{namespace-uri}local-name` and its XML element.
pub type DavProperty = (String, String);

/// The dead WebDAV properties of an object `caller` found by a path walk.
pub async fn dav_properties(
    ctx: &Context,
    caller: UserId,
    entry: &files::PathEntry,
) -> ServiceResult<Vec<DavProperty>> {
    let db = ctx.db();
    access::entry_readable(caller, entry)?;
    Ok(db::objects::metadata(db, entry.id.into())
        .await?
        .into_iter()
        .filter(|(namespace, _, _)| namespace == DAV_NAMESPACE)
        .map(|(_, name, value)| (name, value))
        .collect())
}

/// The dead WebDAV properties of every live child of a folder, by child, in one query (for
/// listings).
pub async fn dav_properties_of_children(
    ctx: &Context,
    owner: UserId,
    folder: &files::PathEntry,
) -> ServiceResult<std::collections::HashMap<Uuid, Vec<DavProperty>>> {
    let db = ctx.db();
    let folder = access::entry_folder(owner, folder)?;
    let mut by_child: std::collections::HashMap<Uuid, Vec<DavProperty>> = std::collections::HashMap::new();
    for (object_id, name, value) in db::objects::metadata_of_children(db, folder, DAV_NAMESPACE).await? {
        by_child.entry(object_id.into()).or_default().push((name, value));
    }
    Ok(by_child)
}

/// Sets (`Some`) or removes (`None`) dead WebDAV properties of a live object
/// ([`access::Reach::Live`]), all or none.
pub async fn patch_dav_properties(
    ctx: &Context,
    object: &Writable,
    changes: &[(String, Option<String>)],
) -> ServiceResult<()> {
    let db = ctx.db();
    for (name, value) in changes {
        if name.is_empty() || name.len() > MAX_DAV_NAME_BYTES {
            return Err(ServiceError::validation("name", "property names are 1 to 512 bytes"));
        }
        if value.as_ref().is_some_and(|v| v.len() > MAX_VALUE_BYTES) {
            return Err(ServiceError::validation("value", "property values are at most 4096 bytes"));
        }
    }
    let mut tx = db.begin().await?;
    for (name, value) in changes {
        db::objects::set_metadata(&mut tx, object.row().id, DAV_NAMESPACE, name, value.as_deref()).await?;
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(())
}

/// The value types of custom properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PropertyType {
    Text,
    Number,
    Boolean,
    /// One of `options.choices`.
    Select,
    /// A date, `YYYY-MM-DD`.
    Date,
}

impl PropertyType {
    fn as_str(self) -> &'static str {
        match self {
            PropertyType::Text => "text",
            PropertyType::Number => "number",
            PropertyType::Boolean => "boolean",
            PropertyType::Select => "select",
            PropertyType::Date => "date",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
    }
}

/// Options of a property; `choices` for `select`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PropertyOptions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PropertyView {
    pub id: Uuid,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: PropertyType,
    pub options: PropertyOptions,
    pub default: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PropertyInput {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: PropertyType,
    #[serde(default)]
    pub options: PropertyOptions,
    pub default: Option<String>,
}

fn check_value(definition: &PropertyRow, value: &str) -> ServiceResult<()> {
    let kind = PropertyType::parse(&definition.kind).unwrap_or(PropertyType::Text);
    let options: PropertyOptions = serde_json::from_str(&definition.options).unwrap_or_default();
    check_typed(kind, &options, value)
}

fn check_typed(kind: PropertyType, options: &PropertyOptions, value: &str) -> ServiceResult<()> {
    let valid = match kind {
        PropertyType::Text => true,
        PropertyType::Number => value.parse::<f64>().is_ok_and(f64::is_finite),
        PropertyType::Boolean => value == "true" || value == "false",
        PropertyType::Select => options.choices.iter().any(|c| c == value),
        PropertyType::Date => {
            let format = time::macros::format_description!("[year]-[month]-[day]");
            time::Date::parse(value, &format).is_ok()
        }
    };
    if valid {
        Ok(())
    } else {
        Err(ServiceError::validation("value", format!("{value:?} is not a valid {} value", kind.as_str())))
    }
}

fn property_view(row: &PropertyRow) -> ServiceResult<PropertyView> {
    Ok(PropertyView {
        id: row.id,
        name: row.name.clone(),
        kind: PropertyType::parse(&row.kind).unwrap_or(PropertyType::Text),
        options: serde_json::from_str(&row.options).unwrap_or_default(),
        default: row.default_value.clone(),
    })
}

fn property_not_found() -> ServiceError {
    ServiceError::not_found(codes::PROPERTY_NOT_FOUND, "no such custom property")
}

fn validate_property(input: &PropertyInput) -> ServiceResult<String> {
    let name = input.name.trim();
    if name.is_empty() || name.len() > MAX_KEY_BYTES {
        return Err(ServiceError::validation("name", "property names are 1 to 128 bytes"));
    }
    if input.kind == PropertyType::Select && input.options.choices.is_empty() {
        return Err(ServiceError::validation("options", "a select property needs choices"));
    }
    if let Some(default) = &input.default {
        check_typed(input.kind, &input.options, default).map_err(|e| e.with_field("default"))?;
    }
    Ok(name.to_owned())
}

fn property_name_taken(err: DbError) -> ServiceError {
    match err {
        ref e if e.is_unique_violation() => {
            ServiceError::conflict(codes::PROPERTY_NAME_TAKEN, "a property with that name exists").with_field("name")
        }
        other => other.into(),
    }
}

pub async fn list_properties(ctx: &Context, owner: UserId) -> ServiceResult<Vec<PropertyView>> {
    let db = ctx.db();
    db::properties::list(db, owner).await?.iter().map(property_view).collect()
}

pub async fn create_property(ctx: &Context, owner: UserId, input: PropertyInput) -> ServiceResult<PropertyView> {
    let db = ctx.db();
    let name = validate_property(&input)?;
    let row = PropertyRow {
        id: Uuid::new_v4(),
        owner_id: owner,
        name,
        kind: input.kind.as_str().to_owned(),
        options: serde_json::to_string(&input.options).map_err(ServiceError::internal)?,
        default_value: input.default,
        created_at: now_ms(),
    };
    db::properties::insert(db, &row).await.map_err(property_name_taken)?;
    property_view(&row)
}

pub async fn update_property(
    ctx: &Context,
    owner: UserId,
    id: Uuid,
    input: PropertyInput,
) -> ServiceResult<PropertyView> {
    let db = ctx.db();
    let name = validate_property(&input)?;
    let existing = db::properties::find_owned(db, owner, id).await?.ok_or_else(property_not_found)?;
    let row = PropertyRow {
        name,
        kind: input.kind.as_str().to_owned(),
        options: serde_json::to_string(&input.options).map_err(ServiceError::internal)?,
        default_value: input.default,
        ..existing
    };
    db::properties::update(db, &row).await.map_err(property_name_taken)?;
    property_view(&row)
}

pub async fn delete_property(ctx: &Context, owner: UserId, id: Uuid) -> ServiceResult<()> {
    let db = ctx.db();
    if db::properties::delete(db, owner, id).await? { Ok(()) } else { Err(property_not_found()) }
}
