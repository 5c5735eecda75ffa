//! `GET /search`: a thin handler over `service::tree::search`.

use axum::Json;
use axum::extract::State;
use nubo_model::domain::object::ObjectKind;
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::ApiQuery;
use crate::guard::AuthRequired;
use nubo_service::context::Context;
use nubo_service::tree::files::ObjectView;
use nubo_service::tree::search::{self, SearchQuery};
use nubo_service::{Page, PageRequest};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// Text the name contains, in either case (Unicode's case rules: `Ä` finds `ä`; composed
    /// and decomposed accents alike); `%`, `_` and `*` are plain characters. At most 255
    /// characters; absent or blank matches every name.
    #[param(max_length = 255)]
    pub q: Option<String>,
    /// Only files or only folders.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<ObjectKind>,
    /// Only objects carrying this tag of the caller's.
    pub tag: Option<Uuid>,
    /// Only objects somewhere below this folder of the caller's.
    pub under: Option<Uuid>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// Search the caller's files and folders (never the trash, never the root itself) by name, tag
/// and folder. Answers objects with their paths and tags, ordered by name compared in lower
/// case (byte order of the lower-cased, composed name), folders before files of the same name.
#[utoipa::path(get, path = "/search", tag = "files", security(("bearer" = [])), params(SearchParams),
    responses(
        (status = 200, description = "One page of matching objects", body = Page<ObjectView>),
        (status = 400, description = "Malformed parameter (a tag or folder id that is not a UUID, an unknown type)", body = ErrorBody),
        (status = 404, description = "No such tag (`tag.not_found`) or folder (`object.not_found`) of the caller", body = ErrorBody),
        (status = 409, description = "`under` names a file (`object.not_a_folder`)", body = ErrorBody),
        (status = 422, description = "Text longer than 255 characters, or paging out of range", body = ErrorBody),
    ))]
pub async fn search(
    State(state): State<Context>,
    caller: AuthRequired,
    ApiQuery(params): ApiQuery<SearchParams>,
) -> ApiResult<Json<Page<ObjectView>>> {
    let page = PageRequest::parse(params.offset, params.limit)?;
    let query = SearchQuery { text: params.q, kind: params.kind, tag: params.tag, under: params.under };
    Ok(Json(search::search(&state, caller.claims.sub, query, page).await?))
}
