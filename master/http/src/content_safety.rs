//! Headers that keep user-supplied file content from running as a page or a script of Nubo's
//! own origin: no MIME sniffing, a CSP that allows no script, `attachment` for types a browser
//! would render actively (HTML, SVG, XML), and a non-script type for JavaScript. The app's own
//! `script-src 'self'` trusts every script of this origin, so a user's `evil.js` served as
//! `text/javascript` would run in a page that includes it; served as `text/plain` with
//! `nosniff`, browsers refuse to run it (Fetch: "should response to request be blocked due to
//! nosniff"). Used for file bodies served to browsers.

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

/// The type user files of a script type are served as: text a browser shows, never runs.
pub const SCRIPT_SERVED_AS: &str = "text/plain; charset=utf-8";

/// Whether `content_type` is one a browser runs as a script (WHATWG MIME Sniffing, "JavaScript
/// MIME type"), or WebAssembly, which a page may compile from this origin.
pub fn is_script(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "application/ecmascript"
            | "application/javascript"
            | "application/x-ecmascript"
            | "application/x-javascript"
            | "text/ecmascript"
            | "text/javascript"
            | "text/javascript1.0"
            | "text/javascript1.1"
            | "text/javascript1.2"
            | "text/javascript1.3"
            | "text/javascript1.4"
            | "text/javascript1.5"
            | "text/jscript"
            | "text/livescript"
            | "text/x-ecmascript"
            | "text/x-javascript"
            | "application/wasm"
    )
}

/// Adds `X-Content-Type-Options: nosniff` and [`FILE_CSP`] to a file response, serves a script
/// type as [`SCRIPT_SERVED_AS`], and adds `Content-Disposition: attachment` when its content
/// type is active (or missing) and no disposition is set yet.
pub fn harden_file_response(headers: &mut HeaderMap) {
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(FILE_CSP));
    let scripted = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(is_script);
    if scripted {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(SCRIPT_SERVED_AS));
    }
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

    #[test]
    fn scripts_are_served_as_plain_text_that_no_browser_runs() {
        for script in
            ["text/javascript", "application/javascript; charset=utf-8", "TEXT/X-JAVASCRIPT", "application/wasm"]
        {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(script).unwrap());
            harden_file_response(&mut headers);
            assert_eq!(headers[header::CONTENT_TYPE], SCRIPT_SERVED_AS, "{script}");
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
        let mut image = HeaderMap::new();
        image.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
        harden_file_response(&mut image);
        assert_eq!(image[header::CONTENT_TYPE], "image/png", "other types are kept");
    }
}
