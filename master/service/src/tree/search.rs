//! Searching the caller's own tree: objects whose name contains a text, in either case by
//! Unicode's rules, optionally of one kind, carrying one tag, or below one folder; the trash is
//! never searched.

use nubo_model::db::{self, like_pattern};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::object::{ObjectKind, search_key};
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ServiceError, ServiceResult};
use crate::tree::access::{self, Reach};
use crate::tree::files::{self, ObjectView};
use crate::{Page, PageRequest, tree::tags};

/// Longest search text, in characters (a name is at most 255 bytes).
const MAX_TEXT: usize = 255;

/// What to look for; every part is optional and the parts given must all hold.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    /// Text the name contains (surrounding white space ignored).
    pub text: Option<String>,
    pub kind: Option<ObjectKind>,
    /// One of the caller's tags.
    pub tag: Option<Uuid>,
    /// One of the caller's live folders.
    pub under: Option<Uuid>,
}

/// One page of the caller's live objects matching `query`, by name (compared as search keys),
/// each with its path and tags, and how many match in all.
pub async fn search(
    ctx: &Context,
    caller: UserId,
    query: SearchQuery,
    page: PageRequest,
) -> ServiceResult<Page<ObjectView>> {
    let mut filter = match query.tag {
        Some(tag) => tags::search_filter(ctx, caller, tag).await?,
        None => db::objects::SearchFilter::default(),
    };
    if let Some(text) = query.text.as_deref().map(str::trim).filter(|text| !text.is_empty()) {
        if text.chars().count() > MAX_TEXT {
            return Err(ServiceError::validation("q", "at most 255 characters"));
        }
        filter.pattern = Some(like_pattern(&search_key(text)));
    }
    filter.kind = query.kind;
    if let Some(folder) = query.under {
        filter.under = Some(access::readable(ctx, caller, folder.into(), Reach::Folder).await?.id());
    }
    let (rows, count) = db::objects::search(ctx.db(), caller, &filter, (page.offset, page.limit)).await?;
    let ids: Vec<_> = rows.iter().map(|row| row.id).collect();
    let mut paths: std::collections::HashMap<_, _> =
        db::objects::paths_names(ctx.db(), &ids).await?.into_iter().collect();
    let mut items: Vec<ObjectView> = rows
        .iter()
        .map(|row| {
            let names = paths.remove(&row.id).unwrap_or_default();
            files::view(row, files::path_from_names(&names))
        })
        .collect();
    files::decorate(ctx.db(), caller, &mut items).await?;
    Ok(Page { count, items })
}
