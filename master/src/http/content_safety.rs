//! Headers that keep user-supplied file content from running as a page of Nubo's own origin:
//! no MIME sniffing, a CSP that allows no script, and `attachment` for types a browser would
//! render actively (HTML, SVG, XML). Used for file bodies served to browsers.

use axum::http::{HeaderMap, HeaderValue, header};

/// No script, no plugin, no form, sandboxed; inline styles only (a plain text or image view
/// still renders).
pub const FILE_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; sandbox";

/// Whether a browser given `content_type` inline could run script from it.
pub fn is_active_content(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "text/html" | "application/xhtml+xml" | "image/svg+xml" | "text/xml" | "application/xml" | "text/xsl"
    ) || essence.ends_with("+xml")
        || essence.is_empty()
}

/// Adds `X-Content-Type-Options: nosniff` and [`FILE_CSP`] to a file response, and
/// `Content-Disposition: attachment` when its content type is active (or missing) and no
/// disposition is set yet.
pub fn harden_file_response(headers: &mut HeaderMap) {
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(FILE_CSP));
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if is_active_content(content_type) && !headers.contains_key(header::CONTENT_DISPOSITION) {
        headers.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scriptable_types_are_active() {
        for active in
            ["text/html", "text/html; charset=utf-8", "IMAGE/SVG+XML", "application/xhtml+xml", "text/xml", ""]
        {
            assert!(is_active_content(active), "{active}");
        }
        for passive in ["text/plain", "image/png", "application/pdf", "application/octet-stream", "application/json"] {
            assert!(!is_active_content(passive), "{passive}");
        }
    }
}
