//! `GET /events`: the caller's tree changes as Server-Sent Events, thin over `service::tree::events`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::ApiResult;
use crate::error::ErrorBody;
use crate::extract::ApiQuery;
use crate::guard::StreamAuth;
use nubo_service::context::Context;
use nubo_service::error::ServiceError;
use nubo_service::tree::events::{self, ChangeEvent, StreamEvent};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Resume after this cursor (the `id` of the last event received); without it the stream
    /// starts now. `Last-Event-ID` (sent by browsers when they reconnect) works the same.
    #[param(minimum = 0)]
    pub since: Option<i64>,
    /// The access token, for clients that cannot send an `Authorization` header (a browser's
    /// `EventSource`).
    pub access_token: Option<String>,
}

/// The caller's tree changes as Server-Sent Events (`text/event-stream`), from any master:
/// `created`, `modified`, `moved`, `renamed`, `trashed`, `restored`, `deleted`, each an event of
/// type `change` whose `id` is its cursor and whose data is a `ChangeEvent`. First comes an event
/// `ready` with the cursor the stream starts from and the cursor of the caller's newest change
/// delivered at that moment, and the server's epoch (`{"cursor": n, "head": h, "epoch": e}`): a
/// client that only wants to catch up reads `change` events until one's cursor reaches `head`;
/// when `head` equals `cursor` nothing changed since (a sync client then needs no listing). The
/// epoch is a random id made with the database: another epoch means another database. A comment
/// every 15 s keeps the connection open. With `since`, what happened after that cursor is
/// replayed first; events are kept `events_retention_days` (default 7), and an older cursor
/// answers 410 `events.cursor_expired`: list the folders again and follow from the `ready`
/// cursor. A cursor beyond the newest this server handed out (it was restored from a backup)
/// answers 409 `events.cursor_ahead`: what the client agreed with the server since is unknown
/// here.
/// A user may hold `max_event_streams_per_user` streams at once (default 8, on all masters
/// together; 429 `events.too_many_streams` beyond). A stream ends with an `error` event when its
/// access token expires (`auth.token_expired`: reconnect with a fresh token and `since`), is
/// revoked, or its user is banned (looked at every 5 s).
#[utoipa::path(get, path = "/events", tag = "files", security(("bearer" = [])), params(EventsQuery),
    responses(
        (status = 200, description = "The event stream", content_type = "text/event-stream", body = StreamEvent),
        (status = 409, description = "The cursor is beyond the newest of this server (a restored backup)", body = ErrorBody),
        (status = 410, description = "The cursor is older than the events kept", body = ErrorBody),
        (status = 422, description = "A negative cursor", body = ErrorBody),
        (status = 429, description = "The user holds `max_event_streams_per_user` streams already", body = ErrorBody),
    ))]
pub async fn stream(
    State(state): State<Context>,
    StreamAuth(caller): StreamAuth,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let since = query.since.or(last_event_id);
    if since.is_some_and(|since| since < 0) {
        return Err(ServiceError::validation("since", "a cursor is 0 or more").into());
    }
    let subscription = events::subscribe(&state, &caller.claims, since).await?;
    let head = subscription.head().await?;
    let epoch = events::epoch(&state).await?;
    let ready = Event::default()
        .event("ready")
        .json_data(serde_json::json!({"cursor": subscription.cursor, "head": head, "epoch": epoch}));
    let first = futures_util::stream::iter(ready.ok().map(Ok));
    let changes = futures_util::stream::unfold(Some(subscription), |subscription| async move {
        let mut subscription = subscription?;
        match subscription.next_batch().await {
            Ok(batch) => Some((batch.iter().filter_map(change).map(Ok).collect::<Vec<_>>(), Some(subscription))),
            Err(error) => Some((vec![Ok(ended(&error))], None)),
        }
    })
    .flat_map(futures_util::stream::iter);
    Ok(Sse::new(first.chain(changes)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

fn change(event: &ChangeEvent) -> Option<Event> {
    Event::default().event("change").id(event.cursor.to_string()).json_data(event).ok()
}

/// The last event of a stream that cannot go on: its error body, for the client to reconnect.
fn ended(error: &ServiceError) -> Event {
    Event::default().event("error").data(error.to_string())
}
