//! Avatars: uploading one (read under a byte limit, decoded under pixel and memory limits,
//! re-encoded as a square PNG of at most 256 px so no metadata of the upload survives), using
//! the public avatar service instead (its URL template is the `avatar_gravatar_url` setting),
//! resetting, and what `GET /user/avatar/{id}/{size}` answers. At most
//! [`DECODE_SLOTS`] uploads are decoded at once on a master; the others wait their turn.

use std::io::Cursor;
use std::sync::LazyLock;

use futures_util::StreamExt;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use nubo_model::db;
use nubo_model::db::avatars::SOURCE_FILE;
use nubo_model::db::users::UserRow;
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use sha2::{Digest, Sha256};

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::settings::site;

/// Largest upload, in bytes.
pub const MAX_UPLOAD: usize = 2 * 1024 * 1024;
/// Side of the stored square, in pixels; smaller sizes are made from it when asked for.
pub const STORED_SIDE: u32 = 256;
/// Smallest side served.
pub const MIN_SIDE: u32 = 16;
/// Widest and tallest upload decoded: a 2 MiB file may claim far more (a decompression bomb).
const MAX_DIMENSION: u32 = 8192;
/// Most memory one decode may take (the decoded pixels and the decoder's buffers): a 12
/// megapixel photo (RGB) fits, a 5700x5700 PNG of 126 KB (a decompression bomb within the byte
/// and side limits) is refused from its header, before a pixel is decoded.
const MAX_DECODE_BYTES: u64 = 48 * 1024 * 1024;
/// Uploads decoded at once: with [`MAX_DECODE_BYTES`] each, a burst of worst-case avatars
/// takes about 100 MiB at most, however many arrive together.
const DECODE_SLOTS: usize = 2;
static DECODING: LazyLock<tokio::sync::Semaphore> = LazyLock::new(|| tokio::sync::Semaphore::new(DECODE_SLOTS));
/// The source value of the public avatar service.
pub const SOURCE_GRAVATAR: &str = "gravatar";

/// How long caches may keep an avatar before asking again (with its ETag).
pub const CACHE_CONTROL: &str = "public, max-age=3600, must-revalidate";

/// What `GET /user/avatar/{id}/{size}` answers.
#[derive(Debug)]
pub enum AvatarAnswer {
    /// A PNG and its quoted ETag.
    Image { png: Vec<u8>, etag: String },
    /// The client's copy (named by `If-None-Match`) is current.
    NotModified { etag: String },
    /// The public avatar service has it.
    Redirect(String),
}

fn not_image() -> ServiceError {
    ServiceError::new(
        ErrorKind::UnsupportedMediaType,
        codes::USER_AVATAR_NOT_IMAGE,
        "the body is not a PNG, JPEG, WebP or GIF image: upload the image file itself",
    )
}

fn too_large() -> ServiceError {
    ServiceError::new(
        ErrorKind::PayloadTooLarge,
        codes::USER_AVATAR_TOO_LARGE,
        format!("an avatar may be at most {} MiB: upload a smaller image", MAX_UPLOAD / (1024 * 1024)),
    )
}

fn too_many_pixels() -> ServiceError {
    ServiceError::new(
        ErrorKind::Validation,
        codes::USER_AVATAR_TOO_MANY_PIXELS,
        format!("the image is larger than {MAX_DIMENSION}x{MAX_DIMENSION} pixels: scale it down first"),
    )
}

fn not_found() -> ServiceError {
    ServiceError::new(ErrorKind::NotFound, codes::USER_AVATAR_NOT_FOUND, "this user has no avatar: show initials")
}

/// The side in pixels a size segment names: `s` (64), `m` (128), `l` (256), or a number from
/// 16 to 256.
pub fn parse_size(size: &str) -> Option<u32> {
    match size {
        "s" => Some(64),
        "m" => Some(128),
        "l" => Some(STORED_SIDE),
        number => number.parse().ok().filter(|n| (MIN_SIDE..=STORED_SIDE).contains(n)),
    }
}

/// Where a user's avatar is served, with a version so a changed avatar is a new URL; `None`
/// when the user has none (clients show initials).
pub fn avatar_url(ctx: &Context, user: &UserRow) -> Option<String> {
    user.avatar.as_ref().map(|_| (ctx.links().avatar)(user.id, user.updated_at))
}

/// Reads an upload of at most [`MAX_UPLOAD`] bytes: a larger declared length is refused before
/// a byte is read, and a body without one stops being read once it passes the limit.
pub async fn read_limited<E: std::fmt::Display>(
    declared: Option<u64>,
    mut stream: impl futures_util::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
) -> ServiceResult<Vec<u8>> {
    if declared.is_some_and(|length| length > MAX_UPLOAD as u64) {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(declared.map_or(64 * 1024, |length| length as usize));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| {
            ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_UNREADABLE_BODY, error.to_string())
        })?;
        if bytes.len() + chunk.len() > MAX_UPLOAD {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Decodes an upload (the orientation its EXIF asks for applied) and re-encodes its centre
/// square, at most [`STORED_SIDE`] px, as PNG. CPU-bound: run it on the blocking pool.
pub fn normalize(upload: &[u8]) -> ServiceResult<Vec<u8>> {
    let mut reader = ImageReader::new(Cursor::new(upload)).with_guessed_format().map_err(|_| not_image())?;
    match reader.format() {
        Some(ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP | ImageFormat::Gif) => {}
        _ => return Err(not_image()),
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_DIMENSION);
    limits.max_image_height = Some(MAX_DIMENSION);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(decode_error)?;
    if decoder.total_bytes() > MAX_DECODE_BYTES {
        return Err(too_many_pixels());
    }
    let orientation = decoder.orientation().map_err(decode_error)?;
    let mut image = DynamicImage::from_decoder(decoder).map_err(decode_error)?;
    image.apply_orientation(orientation);
    let side = image.width().min(image.height());
    if side == 0 {
        return Err(not_image());
    }
    // A square upload is its own centre square: no copy of its pixels.
    let square = if image.width() == image.height() {
        image
    } else {
        image.crop_imm((image.width() - side) / 2, (image.height() - side) / 2, side, side)
    };
    let target = side.min(STORED_SIDE);
    let resized = if side == target { square } else { square.resize_exact(target, target, FilterType::CatmullRom) };
    encode_png(&DynamicImage::ImageRgba8(resized.to_rgba8()))
}

fn decode_error(error: image::ImageError) -> ServiceError {
    match error {
        image::ImageError::Limits(_) => too_many_pixels(),
        _ => not_image(),
    }
}

fn encode_png(image: &DynamicImage) -> ServiceResult<Vec<u8>> {
    let mut png = Cursor::new(Vec::new());
    image.write_to(&mut png, ImageFormat::Png).map_err(ServiceError::internal)?;
    Ok(png.into_inner())
}

/// A stored avatar scaled down to `side` px. CPU-bound: run it on the blocking pool.
fn scaled(png: &[u8], side: u32) -> ServiceResult<Vec<u8>> {
    let image = image::load_from_memory_with_format(png, ImageFormat::Png).map_err(ServiceError::internal)?;
    if image.width() <= side {
        return Ok(png.to_vec());
    }
    encode_png(&image.resize_exact(side, side, FilterType::CatmullRom))
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> ServiceResult<T> + Send + 'static) -> ServiceResult<T> {
    tokio::task::spawn_blocking(work).await.map_err(ServiceError::internal)?
}

/// `PUT /user/settings/avatar`: the upload becomes the caller's avatar.
pub async fn upload(ctx: &Context, user_id: UserId, upload: Vec<u8>) -> ServiceResult<()> {
    let slot = DECODING.acquire().await.map_err(ServiceError::internal)?;
    let png = blocking(move || normalize(&upload)).await?;
    drop(slot);
    let etag = format!("\"{}\"", &blake3::hash(&png).to_hex()[..24]);
    if !db::avatars::put_file(ctx.db(), user_id, &png, &etag, now_ms()).await? {
        return Err(ServiceError::new(ErrorKind::NotFound, codes::USER_NOT_FOUND, "the account no longer exists"));
    }
    Ok(())
}

/// `POST /user/settings/avatar {source: gravatar}`, and `DELETE` (no source).
pub async fn set_source(ctx: &Context, user_id: UserId, source: Option<&str>) -> ServiceResult<()> {
    if !db::avatars::set_source(ctx.db(), user_id, source, now_ms()).await? {
        return Err(ServiceError::new(ErrorKind::NotFound, codes::USER_NOT_FOUND, "the account no longer exists"));
    }
    Ok(())
}

/// The public avatar service's URL for an e-mail address: the template with `{hash}` (SHA-256
/// of the trimmed, lower-cased address, hex, as Gravatar expects) and `{size}` filled in.
pub fn gravatar_url(template: &str, email: &str, side: u32) -> String {
    let hash = Sha256::digest(email.trim().to_lowercase().as_bytes());
    let hex: String = hash.iter().map(|byte| format!("{byte:02x}")).collect();
    template.replace("{hash}", &hex).replace("{size}", &side.to_string())
}

/// The origin of the public avatar service (`https://www.gravatar.com`), which the app's pages
/// must allow images from: an avatar it serves is a redirect there.
pub async fn service_origin(ctx: &Context) -> ServiceResult<Option<String>> {
    let origin = reqwest::Url::parse(&site::current(ctx).await?.avatar_gravatar_url)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .map(|url| url.origin().ascii_serialization());
    Ok(origin)
}

/// Whether an `If-None-Match` header names `etag` (weak comparison, `*` matches).
pub fn matches_etag(if_none_match: &str, etag: &str) -> bool {
    if_none_match.split(',').map(str::trim).any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
}

/// `GET /user/avatar/{id}/{size}`: the image (scaled to `side`), 304 when the client has it,
/// or a redirect to the public avatar service.
pub async fn serve(ctx: &Context, id: UserId, side: u32, if_none_match: Option<&str>) -> ServiceResult<AvatarAnswer> {
    let user = db::users::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    match user.avatar.as_deref() {
        Some(SOURCE_FILE) => {
            let stored = db::avatars::find_file(ctx.db(), id).await?.ok_or_else(not_found)?;
            let etag = format!("\"{}-{side}\"", stored.etag.trim_matches('"'));
            if if_none_match.is_some_and(|header| matches_etag(header, &etag)) {
                return Ok(AvatarAnswer::NotModified { etag });
            }
            let png = blocking(move || scaled(&stored.image, side)).await?;
            Ok(AvatarAnswer::Image { png, etag })
        }
        Some(SOURCE_GRAVATAR) => {
            let template = &site::current(ctx).await?.avatar_gravatar_url;
            Ok(AvatarAnswer::Redirect(gravatar_url(template, &user.email, side)))
        }
        _ => Err(not_found()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageBuffer, Rgb, RgbImage};

    fn encoded(image: DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut bytes = Cursor::new(Vec::new());
        image.write_to(&mut bytes, format).unwrap();
        bytes.into_inner()
    }

    #[test]
    fn a_wide_jpeg_becomes_its_centre_square_as_png() {
        // Left third red, middle third green, right third blue: the centre square is green.
        let wide: RgbImage = ImageBuffer::from_fn(900, 300, |x, _| match x / 300 {
            0 => Rgb([255, 0, 0]),
            1 => Rgb([0, 255, 0]),
            _ => Rgb([0, 0, 255]),
        });
        let png = normalize(&encoded(DynamicImage::ImageRgb8(wide), ImageFormat::Jpeg)).unwrap();
        let out = image::load_from_memory_with_format(&png, ImageFormat::Png).unwrap().to_rgba8();
        assert_eq!(out.dimensions(), (STORED_SIDE, STORED_SIDE));
        let centre = out.get_pixel(128, 128);
        assert!(centre[1] > 200 && centre[0] < 60 && centre[2] < 60, "{centre:?}");
    }

    #[test]
    fn small_images_keep_their_size() {
        let small = DynamicImage::new_rgba8(40, 50);
        let png = normalize(&encoded(small, ImageFormat::Png)).unwrap();
        assert_eq!(image::load_from_memory(&png).unwrap().width(), 40);
    }

    #[test]
    fn text_and_broken_images_are_not_images() {
        let code = |bytes: &[u8]| normalize(bytes).unwrap_err().code;
        assert_eq!(code(b"hello, world"), codes::USER_AVATAR_NOT_IMAGE);
        assert_eq!(code(b"\x89PNG\r\n\x1a\nbroken"), codes::USER_AVATAR_NOT_IMAGE);
        assert_eq!(code(b"BM not really a bitmap"), codes::USER_AVATAR_NOT_IMAGE);
    }

    #[test]
    fn gravatar_hashes_the_trimmed_lower_cased_address() {
        // SHA-256 of "myemailaddress@example.com", Gravatar's own documentation example.
        let url = gravatar_url("https://g.example/{hash}?s={size}", " MyEmailAddress@example.com ", 64);
        assert_eq!(url, "https://g.example/84059b07d4be67b806386c0aad8070a23f18836bbaae342275dc0a83414c32ee?s=64");
    }

    #[test]
    fn sizes_and_etags() {
        assert_eq!(parse_size("s"), Some(64));
        assert_eq!(parse_size("l"), Some(256));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("257"), None);
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("x"), None);
        assert!(matches_etag("\"a\", W/\"b-64\"", "\"b-64\""));
        assert!(matches_etag("*", "\"b\""));
        assert!(!matches_etag("\"b-128\"", "\"b-64\""));
    }
}
