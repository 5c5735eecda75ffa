//! Where this front end serves what the services hand out by URL (downloads, blobs, media, source
//! links, archives, avatars, sign-in callbacks), and which of its routes carry file bytes: the
//! [`FrontEnd`] every [`Context`](nubo_service::context::Context) is built with.

use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::time::Millis;
use nubo_service::context::{FrontEnd, Links};

/// The JSON API's links and route classifier.
pub const FRONT_END: FrontEnd = FrontEnd {
    classify: crate::metrics::classify_transfer,
    links: Links { download, blob, media, source, archive, avatar, sign_in_callback },
};

fn download(token: &str) -> String {
    format!("/api/v1/file/download/{token}")
}

fn blob(token: &str) -> String {
    format!("/api/v1/file/blob/{token}")
}

fn media(token: &str) -> String {
    format!("/api/v1/file/media/{token}")
}

fn source(object: ObjectId, name: &str) -> String {
    let name = percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
    format!("/api/v1/file/source/{object}/{name}")
}

fn archive(token: &str) -> String {
    format!("/api/v1/file/archive/{token}")
}

fn avatar(user: UserId, version: Millis) -> String {
    format!("/api/v1/user/avatar/{user}/l?v={version}")
}

fn sign_in_callback(provider: &str) -> String {
    format!("/api/v1/user/oauth/{provider}/callback")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_link_encodes_the_name_into_one_segment() {
        let id = ObjectId::from(uuid::Uuid::nil());
        assert_eq!(source(id, "a b/c.txt"), format!("/api/v1/file/source/{id}/a%20b%2Fc%2Etxt"));
    }
}
