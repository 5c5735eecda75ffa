//! Image thumbnails, made the same way by the master and by storage nodes: decode a PNG, JPEG,
//! GIF (first frame) or WebP under pixel, memory and time bounds, scale it to fit a square of
//! one of the [`SIDES`], and encode a JPEG. A file that is not such an image, is broken, or
//! would cost too much to decode (a decompression bomb) is refused with a stable reason.

use std::io::Cursor;
use std::time::Duration;

use image::codecs::jpeg::JpegEncoder;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits, RgbImage};
use serde::{Deserialize, Serialize};

/// The longest sides a thumbnail may have, in pixels: a grid tile and a preview.
pub const SIDES: [u32; 2] = [256, 1024];
/// Most pixels a source may declare (100 megapixels); more is refused before decoding.
pub const MAX_PIXELS: u64 = 100_000_000;
/// Most memory one decode may take (the decoded pixels and the decoder's buffers).
pub const MAX_DECODE_BYTES: u64 = 512 * 1024 * 1024;
/// Largest source file read to make a thumbnail: the whole file is read into memory to
/// decode it, so this bounds that too.
pub const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024;
/// Longest one decode may take before the thumbnail is refused (below the 10 s the master
/// gives a storage node's call, so a node answers the refusal in time).
pub const DECODE_TIMEOUT: Duration = Duration::from_secs(8);
/// JPEG quality of thumbnails.
const QUALITY: u8 = 82;
/// The media type of every thumbnail.
pub const CONTENT_TYPE: &str = "image/jpeg";

/// Why a file gets no thumbnail. Final: the same bytes would be refused again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// Not a PNG, JPEG, GIF or WebP image, or a broken one.
    #[error("the file is not a PNG, JPEG, GIF or WebP image, or it is damaged")]
    NotImage,
    /// More pixels or memory than a decode may take (a decompression bomb, or just huge).
    #[error("the image has more than 100 megapixels or needs more than 512 MiB to decode")]
    TooManyPixels,
    /// The file is larger than [`MAX_SOURCE_BYTES`].
    #[error("the file is larger than 64 MiB")]
    TooLarge,
    /// Decoding took longer than [`DECODE_TIMEOUT`].
    #[error("decoding the image took too long")]
    Timeout,
    /// A reason this version does not know (sent by a newer node).
    #[serde(other)]
    #[error("the image cannot be made into a thumbnail")]
    Other,
}

/// Whether `side` is one of the [`SIDES`].
pub fn is_supported_side(side: u32) -> bool {
    SIDES.contains(&side)
}

/// Whether a file of this name is worth trying: its extension names one of the decoded formats.
pub fn has_image_extension(name: &str) -> bool {
    let Some((_, extension)) = name.rsplit_once('.') else { return false };
    matches!(extension.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg" | "jpe" | "jfif" | "gif" | "webp")
}

/// Makes the JPEG thumbnail of `source` fitting a `side` x `side` square (smaller images keep
/// their size). CPU-bound and unbounded in time: call [`render_bounded`] from async code.
pub fn render(source: &[u8], side: u32) -> Result<Vec<u8>, Refusal> {
    if source.len() as u64 > MAX_SOURCE_BYTES {
        return Err(Refusal::TooLarge);
    }
    let mut reader = ImageReader::new(Cursor::new(source)).with_guessed_format().map_err(|_| Refusal::NotImage)?;
    match reader.format() {
        Some(ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP | ImageFormat::Gif) => {}
        _ => return Err(Refusal::NotImage),
    }
    let mut limits = Limits::default();
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(decode_refusal)?;
    // The header's claim is checked before a pixel is decoded: a tiny file may declare
    // 100000 x 100000 pixels.
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > MAX_PIXELS || decoder.total_bytes() > MAX_DECODE_BYTES {
        return Err(Refusal::TooManyPixels);
    }
    if width == 0 || height == 0 {
        return Err(Refusal::NotImage);
    }
    let orientation = decoder.orientation().map_err(decode_refusal)?;
    let mut image = DynamicImage::from_decoder(decoder).map_err(decode_refusal)?;
    image.apply_orientation(orientation);
    let scaled = if image.width().max(image.height()) > side { image.thumbnail(side, side) } else { image };
    encode_jpeg(&flatten(scaled))
}

/// [`render`] on the blocking pool, refused with [`Refusal::Timeout`] after
/// [`DECODE_TIMEOUT`]. (A decode that overran keeps its thread until it ends; the limits above
/// bound how long that can be.)
pub async fn render_bounded(source: Vec<u8>, side: u32) -> Result<Vec<u8>, RenderError> {
    let work = tokio::task::spawn_blocking(move || render(&source, side));
    match tokio::time::timeout(DECODE_TIMEOUT, work).await {
        Ok(Ok(outcome)) => outcome.map_err(RenderError::Refused),
        Ok(Err(join)) => Err(RenderError::Crashed(join.to_string())),
        Err(_) => Err(RenderError::Refused(Refusal::Timeout)),
    }
}

/// Why [`render_bounded`] made nothing.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The file gets no thumbnail (final).
    #[error(transparent)]
    Refused(Refusal),
    /// The decoding thread panicked (a decoder bug): worth logging, not worth retrying.
    #[error("the decoder crashed: {0}")]
    Crashed(String),
}

fn decode_refusal(error: image::ImageError) -> Refusal {
    match error {
        image::ImageError::Limits(_) => Refusal::TooManyPixels,
        _ => Refusal::NotImage,
    }
}

/// Opaque RGB: transparent parts are laid over white, as a file browser's light tile shows them.
fn flatten(image: DynamicImage) -> RgbImage {
    if !image.color().has_alpha() {
        return image.to_rgb8();
    }
    let rgba = image.to_rgba8();
    RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [r, g, b, a] = rgba.get_pixel(x, y).0;
        let over_white = |c: u8| ((u32::from(c) * u32::from(a) + 255 * (255 - u32::from(a)) + 127) / 255) as u8;
        image::Rgb([over_white(r), over_white(g), over_white(b)])
    })
}

fn encode_jpeg(image: &RgbImage) -> Result<Vec<u8>, Refusal> {
    let mut jpeg = Vec::with_capacity(64 * 1024);
    JpegEncoder::new_with_quality(&mut jpeg, QUALITY).encode_image(image).map_err(|_| Refusal::Other)?;
    Ok(jpeg)
}

/// A PNG that declares `width` x `height` pixels but holds a few bytes of one black row: what a
/// decompression bomb looks like to a decoder that trusts the header. For tests.
#[cfg(any(test, feature = "testing"))]
pub fn declared_only_png(width: u32, height: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }
    fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        png.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = png.len();
        png.extend_from_slice(kind);
        png.extend_from_slice(data);
        let crc = crc32(&png[start..]);
        png.extend_from_slice(&crc.to_be_bytes());
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    // 8-bit greyscale, deflate, no filter method beyond the standard, no interlace.
    header.extend_from_slice(&[8, 0, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &header);
    // A stored (uncompressed) zlib stream of a few zero bytes.
    chunk(&mut png, b"IDAT", &[0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff, 0, 0, 0, 0, 0x00, 0x04, 0x00, 0x01]);
    chunk(&mut png, b"IEND", &[]);
    png
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(image: DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut bytes = Cursor::new(Vec::new());
        image.write_to(&mut bytes, format).unwrap();
        bytes.into_inner()
    }

    fn dimensions(jpeg: &[u8]) -> (u32, u32) {
        let image = image::load_from_memory_with_format(jpeg, ImageFormat::Jpeg).unwrap();
        (image.width(), image.height())
    }

    #[test]
    fn a_large_image_shrinks_to_fit_the_side_keeping_its_shape() {
        let png = encoded(DynamicImage::new_rgb8(800, 400), ImageFormat::Png);
        assert_eq!(dimensions(&render(&png, 256).unwrap()), (256, 128));
        let gif = encoded(DynamicImage::new_rgba8(300, 600), ImageFormat::Gif);
        assert_eq!(dimensions(&render(&gif, 256).unwrap()), (128, 256));
    }

    #[test]
    fn webp_and_jpeg_sources_are_drawn_too() {
        let webp = encoded(DynamicImage::new_rgba8(500, 500), ImageFormat::WebP);
        assert_eq!(dimensions(&render(&webp, 256).unwrap()), (256, 256));
        let jpeg = encoded(DynamicImage::new_rgb8(2048, 1024), ImageFormat::Jpeg);
        assert_eq!(dimensions(&render(&jpeg, 1024).unwrap()), (1024, 512));
    }

    #[test]
    fn a_small_image_keeps_its_size() {
        let jpeg = encoded(DynamicImage::new_rgb8(40, 30), ImageFormat::Jpeg);
        assert_eq!(dimensions(&render(&jpeg, 1024).unwrap()), (40, 30));
    }

    #[test]
    fn transparency_is_laid_over_white() {
        let png = encoded(DynamicImage::new_rgba8(8, 8), ImageFormat::Png);
        let thumb = image::load_from_memory(&render(&png, 256).unwrap()).unwrap().to_rgb8();
        assert!(thumb.get_pixel(4, 4).0.iter().all(|&c| c > 240), "{:?}", thumb.get_pixel(4, 4));
    }

    #[test]
    fn text_and_broken_images_are_not_images() {
        assert_eq!(render(b"hello, world", 256), Err(Refusal::NotImage));
        let mut png = encoded(DynamicImage::new_rgb8(64, 64), ImageFormat::Png);
        png.truncate(60);
        assert_eq!(render(&png, 256), Err(Refusal::NotImage));
    }

    #[test]
    fn a_declared_giant_is_refused_before_decoding() {
        assert_eq!(render(&declared_only_png(100_000, 100_000), 256), Err(Refusal::TooManyPixels));
        // Just over the pixel budget in one thin line, too.
        assert_eq!(render(&declared_only_png(100_000_001, 1), 256), Err(Refusal::TooManyPixels));
    }

    #[test]
    fn sides_and_extensions() {
        assert!(is_supported_side(256) && is_supported_side(1024) && !is_supported_side(512));
        assert!(has_image_extension("Photo.JPG") && has_image_extension("a.b.webp"));
        assert!(!has_image_extension("notes.txt") && !has_image_extension("png"));
    }
}
