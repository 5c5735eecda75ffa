//! The caller's tags: manual ones, attached to objects one by one, and automatic ones, whose
//! rule (file-name globs) decides which of the caller's files carry them, current and future,
//! with no per-file rows to keep in step.

use std::collections::HashMap;

use nubo_model::db::objects::ObjectRow;
use nubo_model::db::tags::{TagFields, TagRow};
use nubo_model::db::{self, Db, DbError};
use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::object::{ObjectKind, search_key};
use nubo_model::domain::time::{now_ms, to_rfc3339};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::{self, Reach};
use crate::tree::files::ObjectView;
use crate::{Page, PageRequest};

const MAX_NAME: usize = 64;
const MAX_COLOR: usize = 32;
const MAX_GLOBS: usize = 20;
const MAX_GLOB: usize = 100;

/// How a tag reaches its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TagType {
    /// Attached and detached explicitly (`PUT`/`DELETE /tag/{id}/objects`).
    Manual,
    /// Carried by every file of the owner whose name matches the rule.
    Automatic,
}

impl TagType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Automatic => "automatic",
        }
    }
}

/// A new tag. An automatic tag needs a `rule`: file-name globs separated by commas, such as
/// `*.jpg, *.png`; `*` stands for any run of characters and `?` for one, letters match in
/// either case (at least A-Z), and a file carries the tag when its name matches any glob.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTag {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    #[schema(max_length = 32)]
    pub color: Option<String>,
    #[serde(rename = "type")]
    pub kind: TagType,
    pub rule: Option<String>,
}

/// Changes to a tag; absent fields stay. Turning a tag automatic drops its manual links.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TagChanges {
    pub name: Option<String>,
    pub color: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<TagType>,
    pub rule: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TagView {
    pub id: Uuid,
    pub name: String,
    pub color: Option<String>,
    #[serde(rename = "type")]
    pub kind: TagType,
    pub rule: Option<String>,
    pub created_at: String,
}

/// An object carrying a tag.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaggedObjectView {
    pub id: Uuid,
    pub name: String,
    pub kind: ObjectKind,
    pub parent_id: Option<Uuid>,
    pub size: i64,
    pub updated_at: String,
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::TAG_NOT_FOUND, "no such tag")
}

fn view(row: TagRow) -> TagView {
    let kind = if row.kind == "automatic" { TagType::Automatic } else { TagType::Manual };
    TagView {
        id: row.id,
        name: row.name,
        color: row.color,
        kind,
        rule: row.expression,
        created_at: to_rfc3339(row.created_at),
    }
}

/// The globs of `rule`, checked: 1 to 20, each 1 to 100 characters, no `/`.
fn globs(rule: &str) -> ServiceResult<Vec<&str>> {
    let globs: Vec<&str> = rule.split(',').map(str::trim).filter(|glob| !glob.is_empty()).collect();
    let valid = (1..=MAX_GLOBS).contains(&globs.len())
        && globs.iter().all(|glob| glob.chars().count() <= MAX_GLOB && !glob.contains(['/', '\0']));
    if valid {
        Ok(globs)
    } else {
        Err(ServiceError::validation("rule", "1 to 20 file-name globs separated by commas, such as `*.jpg, *.png`"))
    }
}

/// A glob as an SQL `LIKE` pattern over search keys (escaped with `\`).
pub(crate) fn like_of(glob: &str) -> String {
    let mut pattern = String::with_capacity(glob.len());
    for c in search_key(glob).chars() {
        match c {
            '*' => pattern.push('%'),
            '?' => pattern.push('_'),
            '%' | '_' | '\\' => {
                pattern.push('\\');
                pattern.push(c);
            }
            other => pattern.push(other),
        }
    }
    pattern
}

/// Whether `key` (a name's search key) matches `glob` (a glob's search key): `*` any run of
/// characters, `?` one; the same test as [`like_of`]'s pattern in SQL, for names already read.
fn glob_matches(glob: &[char], key: &[char]) -> bool {
    let (mut g, mut k) = (0, 0);
    // Where the last `*` was, and the key position it has consumed up to.
    let mut star: Option<(usize, usize)> = None;
    while k < key.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, k));
                g += 1;
            }
            Some(&c) if c == '?' || c == key[k] => {
                g += 1;
                k += 1;
            }
            _ => match star {
                // Let the last `*` take one more character and try again from there.
                Some((star_g, star_k)) => {
                    star = Some((star_g, star_k + 1));
                    g = star_g + 1;
                    k = star_k + 1;
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

/// A tag as objects show it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TagBrief {
    pub id: Uuid,
    pub name: String,
    pub color: Option<String>,
}

fn brief(row: TagRow) -> TagBrief {
    TagBrief { id: row.id, name: row.name, color: row.color }
}

/// Fills in the tags of `views`, all objects of `owner`: the manual tags linked to each, and
/// the automatic tags whose rule its name matches (files only), each by name.
pub async fn fill_tags(db: &Db, owner: UserId, views: &mut [ObjectView]) -> ServiceResult<()> {
    let ids: Vec<ObjectId> = views.iter().map(|view| view.id.into()).collect();
    let mut linked: HashMap<ObjectId, Vec<TagBrief>> = HashMap::new();
    for (object, tag) in db::tags::manual_of(db, &ids).await? {
        linked.entry(object).or_default().push(brief(tag));
    }
    let rules: Vec<(TagRow, Vec<Vec<char>>)> = db::tags::automatic_of(db, owner)
        .await?
        .into_iter()
        .map(|tag| {
            let globs = tag.expression.as_deref().and_then(|rule| globs(rule).ok()).unwrap_or_default();
            let globs = globs.into_iter().map(|glob| search_key(glob).chars().collect()).collect();
            (tag, globs)
        })
        .collect();
    for view in views.iter_mut() {
        let mut tags = linked.remove(&ObjectId::from(view.id)).unwrap_or_default();
        if view.kind == ObjectKind::File && !rules.is_empty() {
            let key: Vec<char> = search_key(&view.name).chars().collect();
            let matching = rules.iter().filter(|(_, globs)| globs.iter().any(|glob| glob_matches(glob, &key)));
            tags.extend(matching.map(|(tag, _)| brief(tag.clone())));
        }
        tags.sort_by(|a, b| a.name.cmp(&b.name));
        view.tags = Some(tags);
    }
    Ok(())
}

/// The fields to store, checked: the name (trimmed, 1 to 64 characters), the colour, and a rule
/// exactly when the tag is automatic.
fn fields<'a>(
    name: &'a str,
    color: Option<&'a str>,
    kind: TagType,
    rule: Option<&'a str>,
) -> ServiceResult<TagFields<'a>> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(ServiceError::validation("name", "1 to 64 characters"));
    }
    if color.is_some_and(|color| color.chars().count() > MAX_COLOR) {
        return Err(ServiceError::validation("color", "at most 32 characters"));
    }
    let expression = match (kind, rule) {
        (TagType::Automatic, Some(rule)) => {
            globs(rule)?;
            Some(rule)
        }
        (TagType::Automatic, None) => return Err(ServiceError::validation("rule", "an automatic tag needs a rule")),
        (TagType::Manual, _) => None,
    };
    Ok(TagFields { name, kind: kind.as_str(), expression, color })
}

fn on_name_clash(err: DbError) -> ServiceError {
    if err.is_unique_violation() {
        ServiceError::conflict(codes::TAG_NAME_TAKEN, "you already have a tag of that name").with_field("name")
    } else {
        err.into()
    }
}

async fn owned(ctx: &Context, caller: UserId, id: Uuid) -> ServiceResult<TagRow> {
    db::tags::find_owned(ctx.db(), caller, id).await?.ok_or_else(not_found)
}

pub async fn list(ctx: &Context, caller: UserId) -> ServiceResult<Vec<TagView>> {
    Ok(db::tags::list_of(ctx.db(), caller).await?.into_iter().map(view).collect())
}

pub async fn get(ctx: &Context, caller: UserId, id: Uuid) -> ServiceResult<TagView> {
    Ok(view(owned(ctx, caller, id).await?))
}

pub async fn create(ctx: &Context, caller: UserId, input: NewTag) -> ServiceResult<TagView> {
    let fields = fields(&input.name, input.color.as_deref(), input.kind, input.rule.as_deref())?;
    let id = Uuid::new_v4();
    db::tags::insert(ctx.db(), id, caller, &fields, now_ms()).await.map_err(on_name_clash)?;
    get(ctx, caller, id).await
}

pub async fn update(ctx: &Context, caller: UserId, id: Uuid, changes: TagChanges) -> ServiceResult<TagView> {
    let current = view(owned(ctx, caller, id).await?);
    let name = changes.name.unwrap_or(current.name);
    let color = changes.color.or(current.color);
    let kind = changes.kind.unwrap_or(current.kind);
    let rule = changes.rule.or(current.rule);
    let fields = fields(&name, color.as_deref(), kind, rule.as_deref())?;
    db::tags::update(ctx.db(), id, &fields).await.map_err(on_name_clash)?;
    get(ctx, caller, id).await
}

pub async fn delete(ctx: &Context, caller: UserId, id: Uuid) -> ServiceResult<()> {
    owned(ctx, caller, id).await?;
    db::tags::delete(ctx.db(), id).await?;
    Ok(())
}

/// The manual tag `id` of the caller, and `ids` as the caller's objects (each must be theirs).
async fn manual_and_objects(ctx: &Context, caller: UserId, id: Uuid, ids: &[Uuid]) -> ServiceResult<Vec<ObjectId>> {
    let tag = view(owned(ctx, caller, id).await?);
    if tag.kind == TagType::Automatic {
        return Err(ServiceError::conflict(codes::TAG_AUTOMATIC, "an automatic tag follows its rule"));
    }
    if ids.is_empty() {
        return Err(ServiceError::validation("ids", "give at least one object"));
    }
    let mut objects = Vec::with_capacity(ids.len());
    for &object in ids {
        objects.push(access::readable(ctx, caller, object.into(), Reach::Any).await?.id());
    }
    Ok(objects)
}

/// Attaches manual tag `id` to the caller's objects `ids`.
pub async fn attach(ctx: &Context, caller: UserId, id: Uuid, ids: &[Uuid]) -> ServiceResult<()> {
    let objects = manual_and_objects(ctx, caller, id, ids).await?;
    Ok(db::tags::attach(ctx.db(), id, &objects).await?)
}

/// Detaches manual tag `id` from the caller's objects `ids`.
pub async fn detach(ctx: &Context, caller: UserId, id: Uuid, ids: &[Uuid]) -> ServiceResult<()> {
    let objects = manual_and_objects(ctx, caller, id, ids).await?;
    Ok(db::tags::detach(ctx.db(), id, &objects).await?)
}

/// One page of the caller's objects (not in the trash) carrying tag `id`, by name.
pub async fn objects(
    ctx: &Context,
    caller: UserId,
    id: Uuid,
    page: PageRequest,
) -> ServiceResult<Page<TaggedObjectView>> {
    let tag = view(owned(ctx, caller, id).await?);
    let (rows, count) = match (tag.kind, tag.rule.as_deref()) {
        (TagType::Automatic, Some(rule)) => {
            let patterns: Vec<String> = globs(rule)?.into_iter().map(like_of).collect();
            db::tags::matching_page(ctx.db(), caller, &patterns, page.offset, page.limit).await?
        }
        _ => db::tags::linked_page(ctx.db(), id, page.offset, page.limit).await?,
    };
    Ok(Page { count, items: rows.into_iter().map(tagged).collect() })
}

/// What a search for objects carrying the caller's tag `id` looks for.
pub(crate) async fn search_filter(ctx: &Context, caller: UserId, id: Uuid) -> ServiceResult<db::objects::SearchFilter> {
    let tag = view(owned(ctx, caller, id).await?);
    let mut filter = db::objects::SearchFilter::default();
    match (tag.kind, tag.rule.as_deref()) {
        (TagType::Automatic, Some(rule)) => filter.any_of = Some(globs(rule)?.into_iter().map(like_of).collect()),
        _ => filter.manual_tag = Some(id),
    }
    Ok(filter)
}

fn tagged(row: ObjectRow) -> TaggedObjectView {
    TaggedObjectView {
        id: row.id.into(),
        name: row.name,
        kind: row.kind,
        parent_id: row.parent_id.map(Into::into),
        size: row.size,
        updated_at: to_rfc3339(row.updated_at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_as_their_like_patterns_do() {
        let matches = |glob: &str, name: &str| {
            let glob: Vec<char> = search_key(glob).chars().collect();
            glob_matches(&glob, &search_key(name).chars().collect::<Vec<_>>())
        };
        assert!(matches("*.JPG", "Holiday.jpg"));
        assert!(matches("*.jpg", "ÄRGER.JPG"));
        assert!(matches("img_??.png", "IMG_01.png"));
        assert!(matches("*a*b*", "xaxxbx"));
        assert!(matches("*", ""));
        assert!(!matches("img_??.png", "IMG_1.png"));
        assert!(!matches("*.jpg", "Photo.jpeg"));
        assert!(!matches("*a*b", "xaxxbx"));
        assert!(!matches("report", "report.pdf"));
    }

    #[test]
    fn globs_become_escaped_like_patterns() {
        assert_eq!(like_of("*.JPG"), "%.jpg");
        assert_eq!(like_of("IMG_??.png"), "img\\___.png");
        assert_eq!(like_of("100%*"), "100\\%%");
        assert_eq!(globs(" *.jpg, *.png ,").unwrap(), ["*.jpg", "*.png"]);
        for bad in ["", " , ", "a/b", &"x".repeat(101)] {
            assert!(globs(bad).is_err(), "{bad:?}");
        }
    }
}
