//! What a proof file must be, checked by its content: the declared type's magic bytes, sane
//! dimensions read from the header before any pixel is decoded (a decompression bomb costs a
//! header read), then a full decode to the end of the stream. Pure and blocking: the caller
//! runs it off the async workers.

use std::io::Cursor;

/// The widest or tallest image taken, in pixels.
pub const MAX_SIDE: u32 = 8000;
/// The most pixels an image may have (a 40-megapixel photo).
pub const MAX_PIXELS: u64 = 40_000_000;

/// The image formats a proof may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Png,
    Jpeg,
}

impl Format {
    /// The format a `Content-Type` names (parameters and case ignored).
    pub fn from_content_type(value: &str) -> Option<Format> {
        match value.split(';').next().unwrap_or("").trim().to_ascii_lowercase().as_str() {
            "image/png" => Some(Format::Png),
            "image/jpeg" => Some(Format::Jpeg),
            _ => None,
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            Format::Png => "image/png",
            Format::Jpeg => "image/jpeg",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Png => "PNG",
            Format::Jpeg => "JPEG",
        }
    }

    /// The format the first bytes say, if any of ours.
    fn sniff(bytes: &[u8]) -> Option<Format> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Format::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Format::Jpeg)
        } else {
            None
        }
    }
}

/// Why a body is not a usable proof image; the text is the integrator's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("The body is not a {0} image (its first bytes are not an image's): send the image file itself.")]
    NotAnImage(&'static str),
    #[error("The body is a {actual} image sent as {declared}: send it with Content-Type: {mime}.")]
    Mismatch { declared: &'static str, actual: &'static str, mime: &'static str },
    #[error("The {0} image is damaged or truncated (it does not decode to its end): {1}.")]
    Corrupt(&'static str, String),
    #[error("The image is {width}×{height} pixels: at most {MAX_SIDE} pixels a side and {MAX_PIXELS} pixels in all.")]
    TooLarge { width: u32, height: u32 },
}

/// The image's width and height when `bytes` is a whole, decodable image of `declared`.
pub fn check(declared: Format, bytes: &[u8]) -> Result<(u32, u32), Refusal> {
    match Format::sniff(bytes) {
        None => return Err(Refusal::NotAnImage(declared.name())),
        Some(actual) if actual != declared => {
            return Err(Refusal::Mismatch { declared: declared.mime(), actual: actual.name(), mime: actual.mime() });
        }
        Some(_) => {}
    }
    match declared {
        Format::Png => png_check(bytes),
        Format::Jpeg => jpeg_check(bytes),
    }
}

fn dimensions(width: u32, height: u32) -> Result<(u32, u32), Refusal> {
    if width == 0
        || height == 0
        || width > MAX_SIDE
        || height > MAX_SIDE
        || u64::from(width) * u64::from(height) > MAX_PIXELS
    {
        return Err(Refusal::TooLarge { width, height });
    }
    Ok((width, height))
}

/// Every row decoded (one row's memory at a time), every chunk read to `IEND`, CRCs checked.
fn png_check(bytes: &[u8]) -> Result<(u32, u32), Refusal> {
    let corrupt = |e: png::DecodingError| Refusal::Corrupt("PNG", e.to_string());
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    let header = decoder.read_header_info().map_err(corrupt)?;
    let size = dimensions(header.width, header.height)?;
    let mut reader = decoder.read_info().map_err(corrupt)?;
    while reader.next_row().map_err(corrupt)?.is_some() {}
    reader.finish().map_err(corrupt)?;
    Ok(size)
}

/// Decoded in strict mode: a truncated or damaged scan is an error, not grey pixels.
fn jpeg_check(bytes: &[u8]) -> Result<(u32, u32), Refusal> {
    use zune_jpeg::zune_core::options::DecoderOptions;
    let corrupt = |e: zune_jpeg::errors::DecodeErrors| Refusal::Corrupt("JPEG", e.to_string());
    let options = DecoderOptions::default()
        .set_strict_mode(true)
        .set_max_width(MAX_SIDE as usize)
        .set_max_height(MAX_SIDE as usize);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(Cursor::new(bytes), options);
    decoder.decode_headers().map_err(corrupt)?;
    let info = decoder.info().ok_or_else(|| Refusal::Corrupt("JPEG", "no frame header".into()))?;
    let size = dimensions(u32::from(info.width), u32::from(info.height))?;
    decoder.decode().map_err(corrupt)?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, width, height);
        e.set_color(png::ColorType::Grayscale);
        let mut w = e.write_header().unwrap();
        w.write_image_data(&vec![128u8; (width * height) as usize]).unwrap();
        w.finish().unwrap();
        out
    }

    #[test]
    fn a_png_passes_and_its_damage_is_named() {
        let good = png(16, 8);
        assert_eq!(check(Format::Png, &good), Ok((16, 8)));
        assert!(matches!(check(Format::Png, &good[..good.len() - 20]), Err(Refusal::Corrupt("PNG", _))));
        let mut flipped = good.clone();
        let n = flipped.len();
        flipped[n - 30] ^= 0xFF;
        assert!(matches!(check(Format::Png, &flipped), Err(Refusal::Corrupt("PNG", _))));
        assert!(matches!(check(Format::Jpeg, &good), Err(Refusal::Mismatch { actual: "PNG", .. })));
        assert_eq!(check(Format::Png, b"hello, world"), Err(Refusal::NotAnImage("PNG")));
    }

    /// A header claiming 100,000 × 100,000 pixels is refused before any pixel is decoded.
    #[test]
    fn a_huge_header_is_refused_before_decoding() {
        let mut bomb = png(1, 1);
        // IHDR's width and height (bytes 16..24), with its CRC fixed (bytes 29..33).
        bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let crc = crc32(&bomb[12..29]);
        bomb[29..33].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(check(Format::Png, &bomb), Err(Refusal::TooLarge { width: 100_000, height: 100_000 }));
        assert!(matches!(check(Format::Png, &png(8001, 1)), Err(Refusal::TooLarge { .. })));
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn a_jpeg_passes_and_a_truncated_one_is_refused() {
        let mut good = Vec::new();
        let pixels: Vec<u8> = (0..48 * 32 * 3).map(|i| (i * 7 % 251) as u8).collect();
        jpeg_encoder::Encoder::new(&mut good, 85).encode(&pixels, 48, 32, jpeg_encoder::ColorType::Rgb).unwrap();
        assert_eq!(check(Format::Jpeg, &good), Ok((48, 32)));
        assert!(matches!(check(Format::Jpeg, &good[..good.len() / 2]), Err(Refusal::Corrupt("JPEG", _))));
        assert!(matches!(check(Format::Png, &good), Err(Refusal::Mismatch { actual: "JPEG", .. })));
    }

    #[test]
    fn content_types() {
        assert_eq!(Format::from_content_type("Image/PNG"), Some(Format::Png));
        assert_eq!(Format::from_content_type("image/jpeg; q=1"), Some(Format::Jpeg));
        assert_eq!(Format::from_content_type("image/gif"), None);
    }
}
