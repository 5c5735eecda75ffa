//! HTTP details the master and the storage nodes must answer alike.

/// RFC 6266 `Content-Disposition` for downloading a file called `name`: an ASCII fallback in
/// `filename` and the exact UTF-8 name in `filename*`, so non-ASCII names survive.
pub fn attachment_disposition(name: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    // RFC 5987 attr-char: ALPHA / DIGIT / "!" / "#" / "$" / "&" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~"
    const ATTR: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'!')
        .remove(b'#')
        .remove(b'$')
        .remove(b'&')
        .remove(b'+')
        .remove(b'-')
        .remove(b'.')
        .remove(b'^')
        .remove(b'_')
        .remove(b'`')
        .remove(b'|')
        .remove(b'~');
    let fallback: String = name
        .chars()
        .map(|c| if c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\' { c } else { '_' })
        .collect();
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{}", utf8_percent_encode(name, ATTR))
}

/// Switches Nagle's algorithm off on an accepted connection (for `axum::serve::ListenerExt::tap_io`).
/// hyper writes a response's head and its first body piece separately; with Nagle on, the
/// second write waits for the client's delayed ACK of the first, up to 40 ms on Linux, which
/// turned every small GET and PROPFIND into a 40 ms request. Failing to set it costs only
/// latency, so the connection is served either way.
pub fn answer_without_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_disposition_survives_non_ascii_and_quotes() {
        assert_eq!(
            attachment_disposition("résumé \"final\".pdf"),
            "attachment; filename=\"r_sum_ _final_.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.pdf"
        );
        assert_eq!(
            attachment_disposition("plain.txt"),
            "attachment; filename=\"plain.txt\"; filename*=UTF-8''plain.txt"
        );
    }

    #[tokio::test]
    async fn accepted_connections_answer_without_delay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut accepted, _) = listener.accept().await.unwrap();
        assert!(!accepted.nodelay().unwrap(), "accepted sockets start with Nagle on");
        answer_without_delay(&mut accepted);
        assert!(accepted.nodelay().unwrap());
        drop(client);
    }
}
