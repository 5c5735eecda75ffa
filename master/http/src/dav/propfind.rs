//! `PROPFIND` of the common kind answered without dav-server's per-entry XML trees: Depth 0 or
//! 1 asking for live `DAV:` properties by name (what file managers and sync clients send), over
//! entries without dead properties. The answer is the one dav-server gives (same properties,
//! formats, order and headers), written with quick-xml and sent in pieces; every other
//! `PROPFIND` (allprop, propname, other properties, dead properties, Depth infinity) goes to
//! dav-server.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use dav_server::davpath::DavPath;
use dav_server::fs::DavMetaData;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

use super::fs::{Meta, NuboFs};
use nubo_service::tree::files::PathEntry;

const DAV_NS: &str = "DAV:";
/// Entries written per piece of the answer.
const ENTRIES_PER_PIECE: usize = 256;
/// What dav-server leaves unencoded in an href: RFC 3986 unreserved characters and `/`.
const HREF_ENCODE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');

/// A live property this path answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveProp {
    ResourceType,
    ContentLength,
    LastModified,
    ETag,
    ContentType,
    CreationDate,
    /// Only ever a dead property here: with no dead properties it is simply absent.
    DisplayName,
}

impl LiveProp {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "resourcetype" => Self::ResourceType,
            "getcontentlength" => Self::ContentLength,
            "getlastmodified" => Self::LastModified,
            "getetag" => Self::ETag,
            "getcontenttype" => Self::ContentType,
            "creationdate" => Self::CreationDate,
            "displayname" => Self::DisplayName,
            _ => return None,
        })
    }

    fn element(self) -> &'static str {
        match self {
            Self::ResourceType => "D:resourcetype",
            Self::ContentLength => "D:getcontentlength",
            Self::LastModified => "D:getlastmodified",
            Self::ETag => "D:getetag",
            Self::ContentType => "D:getcontenttype",
            Self::CreationDate => "D:creationdate",
            Self::DisplayName => "D:displayname",
        }
    }
}

/// The properties a `<D:propfind><D:prop>…</D:prop></D:propfind>` body asks for, when they are
/// all live properties answered here; `None` for any other body.
pub fn requested_props(body: &[u8]) -> Option<Vec<LiveProp>> {
    let root = xmltree::Element::parse(body).ok()?;
    if root.name != "propfind" || root.namespace.as_deref() != Some(DAV_NS) {
        return None;
    }
    let mut asked = root.children.iter().filter_map(xmltree::XMLNode::as_element);
    let prop = asked.next()?;
    if asked.next().is_some() || prop.name != "prop" || prop.namespace.as_deref() != Some(DAV_NS) {
        return None;
    }
    prop.children
        .iter()
        .filter_map(xmltree::XMLNode::as_element)
        .map(|e| if e.namespace.as_deref() == Some(DAV_NS) { LiveProp::parse(&e.name) } else { None })
        .collect()
}

/// The `Depth` of a `PROPFIND` this path answers: `Some(false)` for 0, `Some(true)` for 1.
pub fn depth_one(value: Option<&HeaderValue>) -> Option<bool> {
    match value?.as_bytes() {
        b"0" => Some(false),
        b"1" => Some(true),
        _ => None,
    }
}

/// Answers the `PROPFIND` of `path` when its entries carry no dead properties; `None` leaves
/// the request to dav-server (also for a missing path, or a folder named without its slash,
/// whose answer dav-server decorates).
pub async fn answer(fs: &NuboFs, path: &DavPath, depth_one: bool, props: Vec<LiveProp>) -> Option<Response> {
    let (entry, children) = fs.plain_listing(path, depth_one).await.ok()??;
    if entry.is_folder != path.is_collection() {
        return None;
    }
    let base = path.with_prefix().as_url_string();
    let props: Arc<[LiveProp]> = props.into();
    let mut head = Writer::new(Vec::new());
    head.write_event(Event::Decl(BytesDecl::new("1.0", Some("utf-8"), None))).ok()?;
    head.write_event(Event::Start(BytesStart::new("D:multistatus").with_attributes([("xmlns:D", DAV_NS)]))).ok()?;
    write_response(&mut head, &base, &entry, &props).ok()?;
    let first = Bytes::from(head.into_inner());

    // The children follow in pieces, written as the client takes them.
    let mut rest = children.into_iter().peekable();
    let mut closed = false;
    let pieces = std::iter::once(Ok::<_, std::io::Error>(first)).chain(std::iter::from_fn(move || {
        if closed {
            return None;
        }
        let mut writer = Writer::new(Vec::new());
        for child in rest.by_ref().take(ENTRIES_PER_PIECE) {
            let href = child_href(&base, &child);
            if let Err(error) = write_response(&mut writer, &href, &child, &props) {
                closed = true;
                return Some(Err(error));
            }
        }
        if rest.peek().is_none() {
            closed = true;
            if let Err(error) = writer.write_event(Event::End(BytesEnd::new("D:multistatus"))) {
                return Some(Err(error));
            }
        }
        Some(Ok(Bytes::from(writer.into_inner())))
    }));
    let mut response = Response::new(axum::body::Body::from_stream(futures_util::stream::iter(pieces)));
    *response.status_mut() = StatusCode::MULTI_STATUS;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/xml; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    Some(response)
}

fn child_href(base: &str, child: &PathEntry) -> String {
    let mut href = base.to_owned();
    if !href.ends_with('/') {
        href.push('/');
    }
    href.extend(percent_encoding::utf8_percent_encode(&child.name, HREF_ENCODE));
    if child.is_folder {
        href.push('/');
    }
    href
}

fn text_element(writer: &mut Writer<Vec<u8>>, name: &str, text: &str) -> std::io::Result<()> {
    writer.write_event(Event::Start(BytesStart::new(name)))?;
    writer.write_event(Event::Text(BytesText::new(text)))?;
    writer.write_event(Event::End(BytesEnd::new(name)))
}

fn write_response(
    writer: &mut Writer<Vec<u8>>,
    href: &str,
    entry: &PathEntry,
    props: &[LiveProp],
) -> std::io::Result<()> {
    let meta = Meta::of(entry);
    writer.write_event(Event::Start(BytesStart::new("D:response")))?;
    text_element(writer, "D:href", href)?;
    let mut found = props.iter().filter(|&&prop| answers(prop, &meta)).peekable();
    if found.peek().is_some() {
        writer.write_event(Event::Start(BytesStart::new("D:propstat")))?;
        writer.write_event(Event::Start(BytesStart::new("D:prop")))?;
        for &prop in found {
            let name = prop.element();
            match prop {
                LiveProp::ResourceType => {
                    writer.write_event(Event::Start(BytesStart::new(name)))?;
                    if meta.is_dir {
                        writer.write_event(Event::Start(BytesStart::new("D:collection")))?;
                        writer.write_event(Event::End(BytesEnd::new("D:collection")))?;
                    }
                    writer.write_event(Event::End(BytesEnd::new(name)))?;
                }
                LiveProp::ContentLength => text_element(writer, name, &meta.size.to_string())?,
                LiveProp::LastModified => {
                    let modified = meta.modified().map_err(|_| std::io::Error::other("no time"))?;
                    text_element(writer, name, &httpdate::fmt_http_date(modified))?;
                }
                LiveProp::ETag => text_element(writer, name, &meta.etag().unwrap_or_default())?,
                LiveProp::ContentType => text_element(writer, name, content_type(entry))?,
                LiveProp::CreationDate => text_element(writer, name, &creation_date(&meta))?,
                LiveProp::DisplayName => {}
            }
        }
        writer.write_event(Event::End(BytesEnd::new("D:prop")))?;
        text_element(writer, "D:status", "HTTP/1.1 200 OK")?;
        writer.write_event(Event::End(BytesEnd::new("D:propstat")))?;
    }
    writer.write_event(Event::End(BytesEnd::new("D:response")))
}

/// Whether `prop` has a value for this entry (dav-server leaves out the ones without).
fn answers(prop: LiveProp, meta: &Meta) -> bool {
    match prop {
        LiveProp::ContentLength => !meta.is_dir,
        LiveProp::DisplayName => false,
        _ => true,
    }
}

fn content_type(entry: &PathEntry) -> &'static str {
    if entry.is_folder {
        return "httpd/unix-directory";
    }
    entry
        .name
        .rsplit_once('.')
        .and_then(|(_, extension)| mime_guess::from_ext(extension).first_raw())
        .unwrap_or("application/octet-stream")
}

/// RFC 3339 to the second, in UTC, as dav-server writes it.
fn creation_date(meta: &Meta) -> String {
    let seconds = meta.created.max(0) / 1000;
    time::OffsetDateTime::from_unix_timestamp(seconds)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_live_properties_by_name_are_taken() {
        let ask = |inner: &str| {
            format!(r#"<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:Z="urn:z">{inner}</D:propfind>"#)
        };
        let taken = requested_props(ask("<D:prop><D:getetag/><D:resourcetype/></D:prop>").as_bytes());
        assert_eq!(taken, Some(vec![LiveProp::ETag, LiveProp::ResourceType]));
        for declined in [
            "<D:allprop/>",
            "<D:propname/>",
            "<D:prop><D:getetag/><Z:colour/></D:prop>",
            "<D:prop><D:lockdiscovery/></D:prop>",
            "<D:prop><D:quota-used-bytes/></D:prop>",
            "<D:prop><D:getetag/></D:prop><D:include/>",
        ] {
            assert_eq!(requested_props(ask(declined).as_bytes()), None, "{declined}");
        }
        assert_eq!(requested_props(b""), None, "an empty body means allprop");
        assert_eq!(requested_props(br#"<propfind xmlns="urn:other"><prop/></propfind>"#), None);
    }

    #[test]
    fn only_depth_zero_and_one_are_taken() {
        assert_eq!(depth_one(Some(&HeaderValue::from_static("0"))), Some(false));
        assert_eq!(depth_one(Some(&HeaderValue::from_static("1"))), Some(true));
        assert_eq!(depth_one(Some(&HeaderValue::from_static("infinity"))), None);
        assert_eq!(depth_one(None), None);
    }
}
