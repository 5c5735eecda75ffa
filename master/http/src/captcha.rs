//! The one gate of every captcha-protected route: [`CaptchaJson`] reads a JSON body and checks
//! its `captcha` field for the route's scene before the handler runs; [`ShareVisitor`] checks
//! the `X-Captcha` header whenever a share password comes. A protected route cannot take its
//! input any other way, so no scene is forgotten. Checks are `service::identity::captcha::verify`.

use std::marker::PhantomData;

use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::header;
use axum::http::request::Parts;
use nubo_model::domain::captcha::CaptchaScene;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::extract::{ApiJson, ClientAddress};
use nubo_service::context::Context;
use nubo_service::identity::captcha;
use nubo_service::sharing::shares::Visitor;

/// A scene as a type, so a route names its scene in its signature.
pub trait Scene: Send + Sync + 'static {
    const SCENE: CaptchaScene;
}

/// The scenes as types (`CaptchaJson<Body, scene::Register>`).
pub mod scene {
    use super::{CaptchaScene, Scene};

    macro_rules! scenes {
        ($($name:ident),*) => {$(
            #[doc = concat!("The `", stringify!($name), "` scene.")]
            pub struct $name;
            impl Scene for $name {
                const SCENE: CaptchaScene = CaptchaScene::$name;
            }
        )*};
    }
    scenes!(Register, Login, MagicLink, PasswordReset, Report, Redeem);
}

/// A request body that carries a captcha answer.
pub trait CaptchaAnswer {
    fn captcha(&self) -> Option<&str>;
    /// Whether this request must pass the scene's captcha; a sign-in with a single-use token
    /// the server issued (passkey challenge, mailed link, OAuth ticket) need not.
    fn asks_captcha(&self) -> bool {
        true
    }
}

/// A JSON body ([`ApiJson`]) whose captcha passed scene `S`.
pub struct CaptchaJson<T, S>(pub T, pub PhantomData<S>);

impl<T, S> FromRequest<Context> for CaptchaJson<T, S>
where
    T: DeserializeOwned + CaptchaAnswer + Send + Sync,
    S: Scene,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Context) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let ClientAddress(address) = ClientAddress::from_request_parts(&mut parts, state).await?;
        let ApiJson(value) = ApiJson::<T>::from_request(Request::from_parts(parts, body), state).await?;
        if value.asks_captcha() {
            captcha::verify(state, S::SCENE, value.captcha(), address).await?;
        }
        Ok(Self(value, PhantomData))
    }
}

/// The header a share visitor sends the `share_password` captcha in, beside the password.
const CAPTCHA_HEADER: &str = "x-captcha";
/// The header a visitor sends a share's password in (or `?password=`, which proxies may log).
const PASSWORD_HEADER: &str = "x-share-password";
/// The header a visitor sends a share grant in (from the answer that took the password).
const GRANT_HEADER: &str = "x-share-grant";

/// Who is visiting a share, with what. Any request that carries a password (header or
/// `?password=`) has passed the `share_password` captcha (`X-Captcha`).
pub struct ShareVisitor {
    password: Option<String>,
    grant: Option<String>,
    address: std::net::IpAddr,
    agent: String,
}

impl ShareVisitor {
    pub fn visitor(&self) -> Visitor<'_> {
        Visitor {
            password: self.password.as_deref(),
            grant: self.grant.as_deref(),
            address: self.address,
            agent: &self.agent,
        }
    }
}

#[derive(serde::Deserialize)]
struct PasswordParam {
    password: Option<String>,
}

impl FromRequestParts<Context> for ShareVisitor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Context) -> Result<Self, Self::Rejection> {
        let ClientAddress(address) = ClientAddress::from_request_parts(parts, state).await?;
        let text = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        // An unreadable query is the handlers' to refuse; here it only means no password.
        let query = Query::<PasswordParam>::try_from_uri(&parts.uri).ok().and_then(|q| q.0.password);
        let password = text(PASSWORD_HEADER).or(query);
        if password.is_some() {
            captcha::verify(state, CaptchaScene::SharePassword, text(CAPTCHA_HEADER).as_deref(), address).await?;
        }
        Ok(Self {
            password,
            grant: text(GRANT_HEADER),
            address,
            agent: text(header::USER_AGENT.as_str()).unwrap_or_default(),
        })
    }
}
