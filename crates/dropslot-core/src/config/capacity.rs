//! `[capacity]`: how a depot's drop-off slots count their room (CONTRACT §10, issue 45).

use std::collections::BTreeMap;

use serde::Deserialize;

/// How a depot sells its drop-off slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityMode {
    /// Only the configured and per-date limits count (§10's numbers).
    Limits,
    /// A slot has room while the depot's tentative plan of the date can take the stop, with
    /// the drivers working that day; the limits still apply where set.
    Fleet,
}

impl CapacityMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Limits => "limits",
            Self::Fleet => "fleet",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCapacity {
    mode: CapacityMode,
    /// Depot code → its own mode.
    #[serde(default)]
    depots: BTreeMap<String, CapacityMode>,
}

impl Default for RawCapacity {
    fn default() -> Self {
        RawCapacity { mode: CapacityMode::Limits, depots: BTreeMap::new() }
    }
}

/// `[capacity]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacitySettings {
    /// Every depot's mode unless it has its own.
    pub mode: CapacityMode,
    pub depots: BTreeMap<String, CapacityMode>,
}

impl Default for CapacitySettings {
    fn default() -> Self {
        CapacitySettings { mode: CapacityMode::Limits, depots: BTreeMap::new() }
    }
}

impl CapacitySettings {
    /// The mode of depot `code`.
    pub fn mode_of(&self, code: &str) -> CapacityMode {
        self.depots.get(code).copied().unwrap_or(self.mode)
    }

    /// Whether depot `code` books its drop-offs on its fleet.
    pub fn fleet(&self, code: &str) -> bool {
        self.mode_of(code) == CapacityMode::Fleet
    }
}

/// Checks the depots named exist.
pub(super) fn build(raw: RawCapacity, depots: &[super::Depot]) -> Result<CapacitySettings, String> {
    for code in raw.depots.keys() {
        if !depots.iter().any(|d| d.code == *code) {
            return Err(format!("capacity.depots.{code}: not a depot of the area ([[warehouses]] code)"));
        }
    }
    for d in depots {
        let fleet = raw.depots.get(&d.code).copied().unwrap_or(raw.mode) == CapacityMode::Fleet;
        if fleet && d.location.is_none() {
            return Err(format!(
                "capacity: depot {} books on its fleet but has no coordinates ([[warehouses]] lat and lng)",
                d.code
            ));
        }
    }
    Ok(CapacitySettings { mode: raw.mode, depots: raw.depots })
}

/// What happens to a booked drop-off the fleet can no longer route (`[dispatch] unplaced`,
/// issue 45): a driver removed, a van made smaller, a shift cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unplaced {
    /// Booked into the next slot with room; the merchant and the recipient are told.
    Rebook,
    /// It waits on the board for the dispatcher.
    Hold,
}

impl Unplaced {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rebook => "rebook",
            Self::Hold => "hold",
        }
    }
}

/// `[dispatch]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatchSettings {
    pub unplaced: Unplaced,
    /// CONTRACT §16: a drop-off that becomes plannable for a date whose delivery plan is
    /// published goes into a route not started yet (default on).
    #[serde(default = "on")]
    pub auto_insert: bool,
}

fn on() -> bool {
    true
}

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings { unplaced: Unplaced::Rebook, auto_insert: true }
    }
}
