//! The attempts policy's shape (CONTRACT §15): `[attempts]` holds the defaults, each client its
//! own (`PUT /attempts/settings`). What a policy decides is `crate::attempts`'.

use serde::{Deserialize, Serialize};

/// What follows a failed delivery attempt while attempts are left (`[attempts]
/// after_failure`, per client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AfterFailure {
    /// Booked into the next slot with room from the next operating day (`to_attempt`).
    Reattempt,
    /// Sent back to the merchant (`return_scheduled`).
    Return,
    /// Left `failed` for the merchant to decide.
    Hold,
}

impl AfterFailure {
    pub const ALL: [AfterFailure; 3] = [AfterFailure::Reattempt, AfterFailure::Return, AfterFailure::Hold];

    pub fn as_str(self) -> &'static str {
        match self {
            AfterFailure::Reattempt => "reattempt",
            AfterFailure::Return => "return",
            AfterFailure::Hold => "hold",
        }
    }

    /// A stored value; `None` for anything else (never a default).
    pub fn parse(s: &str) -> Option<AfterFailure> {
        AfterFailure::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// A client's attempts policy in one mode (`[attempts]` gives the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(example = json!({"max_attempts": 3, "after_failure": "reattempt", "max_return_attempts": 2})))]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Delivery attempts before a failed shipment can only be returned or cancelled (1–10).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10, example = 3))]
    pub max_attempts: u32,
    pub after_failure: AfterFailure,
    /// Failed return attempts before a return is `cancelled` (1–10).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10, example = 2))]
    pub max_return_attempts: u32,
}

/// The range of both counts.
pub const MAX_ATTEMPTS_RANGE: std::ops::RangeInclusive<u32> = 1..=10;

impl Default for Policy {
    fn default() -> Policy {
        Policy { max_attempts: 3, after_failure: AfterFailure::Reattempt, max_return_attempts: 2 }
    }
}

impl Policy {
    /// The field paths and messages of what is out of range.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (path, v) in [("max_attempts", self.max_attempts), ("max_return_attempts", self.max_return_attempts)] {
            if !MAX_ATTEMPTS_RANGE.contains(&v) {
                out.push((path, format!("Must be 1 to 10, not {v}.")));
            }
        }
        out
    }
}
