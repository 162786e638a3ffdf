//! Printable shipping labels for dropslot: parcel, drop-off and pick-up labels
//! as PDF or ZPL II, 4x6 or 4x4 inches; and drivers' run sheets as PDF
//! ([`render_run_sheet`]).
//!
//! Rendering is pure and deterministic: no I/O, no clock, no randomness, so
//! the same input always gives the same bytes (HTTP caches and `ETag`s work).
//! [`render`] never panics, whatever the strings contain: text is cleaned,
//! wrapped, shrunk and at last cut to fit its box.
//!
//! ```
//! use dropslot_labels::{render, Label, LabelFormat, LabelSize, PickUpLabel};
//! let label = Label::PickUp(PickUpLabel { pick_up_code: "PK7M2Q9XR4TB".into(), ..Default::default() });
//! let zpl = render(&label, LabelSize::FourBySix, LabelFormat::Zpl);
//! assert!(zpl.starts_with(b"^XA"));
//! ```

mod code128;
mod font;
mod layout;
mod pdf;
mod run_sheet;
mod text;
mod zpl;

pub use run_sheet::{RunSheet, RunSheetParcel, RunSheetStop, render_run_sheet};

use std::fmt;
use std::str::FromStr;

/// Label stock size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LabelSize {
    /// 4 × 6 in (288 × 432 pt, 812 × 1218 dots at 203 dpi).
    #[default]
    FourBySix,
    /// 4 × 4 in (288 × 288 pt, 812 × 812 dots at 203 dpi).
    FourByFour,
}

impl LabelSize {
    pub const ALL: [Self; 2] = [Self::FourBySix, Self::FourByFour];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::FourBySix => "4x6",
            Self::FourByFour => "4x4",
        }
    }

    /// Page width and height in PDF points (1/72 in).
    pub fn points(self) -> (f32, f32) {
        match self {
            Self::FourBySix => (288.0, 432.0),
            Self::FourByFour => (288.0, 288.0),
        }
    }

    /// Width and height in dots at 203 dpi.
    pub fn dots(self) -> (u32, u32) {
        match self {
            Self::FourBySix => (812, 1218),
            Self::FourByFour => (812, 812),
        }
    }
}

/// Output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LabelFormat {
    #[default]
    Pdf,
    /// ZPL II for 203 dpi Zebra-compatible thermal printers, UTF-8 (`^CI28`).
    Zpl,
}

impl LabelFormat {
    pub const ALL: [Self; 2] = [Self::Pdf, Self::Zpl];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pdf => "pdf",
            Self::Zpl => "zpl",
        }
    }

    /// HTTP `Content-Type`. ZPL has no registered media type;
    /// `application/x-zpl` keeps browsers from rendering it as a page and is
    /// what print clients commonly accept. The bytes are UTF-8 text.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Pdf => "application/pdf",
            Self::Zpl => "application/x-zpl",
        }
    }

    /// File name extension, without the dot.
    pub fn extension(self) -> &'static str {
        self.as_str()
    }
}

/// Error from parsing a [`LabelSize`] or [`LabelFormat`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseLabelOptionError {
    what: &'static str,
    expected: &'static str,
    value: String,
}

impl fmt::Display for ParseLabelOptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown label {} {:?} (expected {})", self.what, self.value, self.expected)
    }
}

impl std::error::Error for ParseLabelOptionError {}

impl FromStr for LabelSize {
    type Err = ParseLabelOptionError;
    /// Accepts `4x6` and `4x4`, case-insensitively.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|v| v.as_str().eq_ignore_ascii_case(s)).ok_or_else(|| ParseLabelOptionError {
            what: "size",
            expected: "4x6 or 4x4",
            value: s.to_owned(),
        })
    }
}

impl FromStr for LabelFormat {
    type Err = ParseLabelOptionError;
    /// Accepts `pdf` and `zpl`, case-insensitively.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|v| v.as_str().eq_ignore_ascii_case(s)).ok_or_else(|| ParseLabelOptionError {
            what: "format",
            expected: "pdf or zpl",
            value: s.to_owned(),
        })
    }
}

impl fmt::Display for LabelSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for LabelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sender, receiver or pick-up location.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Party {
    pub name: String,
    /// Street address; may contain newlines, which become line breaks.
    pub address: String,
    pub postal_code: String,
    pub phone: String,
}

/// The label stuck on each parcel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParcelLabel {
    pub sender: Party,
    pub receiver: Party,
    /// Delivery date as shown, e.g. `2026-11-23`.
    pub scheduled_date: String,
    /// Time slot as shown, e.g. `14:00 - 18:00`.
    pub time_slot: String,
    /// Sort code, printed large, e.g. `TOR-DT`.
    pub zone_code: String,
    /// Warehouse code, printed large, e.g. `YYZ1`.
    pub warehouse_code: String,
    /// 1-based position of this parcel in its drop-off.
    pub index: u32,
    pub count: u32,
    /// `small`, `medium`, …; printed upper-case.
    pub size_code: String,
    /// Code 128 payload: printable ASCII (others print as `?`).
    pub barcode: String,
    /// Tracking code of the drop-off, printed as text.
    pub tracking_code: String,
}

/// The label for a drop-off shipment (all parcels to one receiver).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropOffLabel {
    /// Code 128 payload.
    pub tracking_code: String,
    /// QR payload.
    pub tracking_url: String,
    pub sender: Party,
    pub receiver: Party,
    pub scheduled_date: String,
    pub time_slot: String,
    pub zone_code: String,
    pub warehouse_code: String,
    pub parcel_count: u32,
}

/// The label for a pick-up shipment (what the driver collects where).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PickUpLabel {
    /// Code 128 payload and the pick-up's id.
    pub pick_up_code: String,
    /// Pick-up location; `name` may be empty.
    pub address: Party,
    pub scheduled_date: String,
    pub time_slot: String,
    /// Parcel counts by size code, shown in the given order.
    pub parcels_by_size: Vec<(String, u32)>,
    pub drop_off_count: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Label {
    Parcel(ParcelLabel),
    DropOff(DropOffLabel),
    PickUp(PickUpLabel),
}

/// Renders `label` as a complete PDF document or ZPL II job.
///
/// Deterministic and panic-free for any string content.
pub fn render(label: &Label, size: LabelSize, format: LabelFormat) -> Vec<u8> {
    let canvas = layout::build(label, size);
    match format {
        LabelFormat::Pdf => pdf::write(&canvas),
        LabelFormat::Zpl => zpl::write(&canvas, size).into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip() {
        for s in LabelSize::ALL {
            assert_eq!(s.as_str().parse::<LabelSize>(), Ok(s));
        }
        for f in LabelFormat::ALL {
            assert_eq!(f.as_str().to_uppercase().parse::<LabelFormat>(), Ok(f));
        }
        let err = "A4".parse::<LabelSize>().unwrap_err();
        assert_eq!(err.to_string(), "unknown label size \"A4\" (expected 4x6 or 4x4)");
        assert!("png".parse::<LabelFormat>().is_err());
    }
}
