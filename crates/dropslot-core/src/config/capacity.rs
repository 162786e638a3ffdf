//! `[capacity]`: how a depot's drop-off slots count their room (CONTRACT §10, issue 45).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

/// How a depot sells its drop-off slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityMode {
    /// Only the configured and per-date limits count (§10's numbers).
    #[default]
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

    /// The install's default mode (`[capacity] mode` unset), chosen once at the first start
    /// that asks and kept: fleet for a new install, limits for a database already in use
    /// (`in_use`: it holds a client), so an upgrade keeps selling as it did.
    pub fn install_default(in_use: bool) -> CapacityMode {
        if in_use { CapacityMode::Limits } else { CapacityMode::Fleet }
    }

    /// A stored mode; anything else is an error, never a default.
    pub fn parse(s: &str) -> Option<CapacityMode> {
        match s {
            "limits" => Some(CapacityMode::Limits),
            "fleet" => Some(CapacityMode::Fleet),
            _ => None,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCapacity {
    /// Unset: the install's default.
    #[serde(default)]
    mode: Option<CapacityMode>,
    /// Depot code → its own mode.
    #[serde(default)]
    depots: BTreeMap<String, CapacityMode>,
}

/// `[capacity]`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapacitySettings {
    /// `[capacity] mode` as configured; `None`: the install's default.
    pub configured: Option<CapacityMode>,
    pub depots: BTreeMap<String, CapacityMode>,
    /// What an unset mode means on this install (limits until [`CapacitySettings::resolve`]).
    install: CapacityMode,
    /// Depots without coordinates: they cannot be routed from, so the install's default
    /// leaves them on limits (a mode configured as fleet for one is refused at start).
    unroutable: BTreeSet<String>,
}

impl CapacitySettings {
    /// Every depot on `mode` (a configured mode).
    pub fn all(mode: CapacityMode) -> CapacitySettings {
        CapacitySettings { configured: Some(mode), ..CapacitySettings::default() }
    }

    /// Sets what an unset mode means: the install's default, read at start.
    pub fn resolve(&mut self, install: CapacityMode) {
        self.install = install;
    }

    /// The mode every depot without its own follows.
    pub fn mode(&self) -> CapacityMode {
        self.configured.unwrap_or(self.install)
    }

    /// The mode of depot `code`.
    pub fn mode_of(&self, code: &str) -> CapacityMode {
        if let Some(m) = self.depots.get(code).copied().or(self.configured) {
            return m;
        }
        if self.unroutable.contains(code) { CapacityMode::Limits } else { self.install }
    }

    /// Whether depot `code` books its drop-offs on its fleet.
    pub fn fleet(&self, code: &str) -> bool {
        self.mode_of(code) == CapacityMode::Fleet
    }
}

/// Checks the depots named exist, and that a depot configured on its fleet can be routed from.
pub(super) fn build(raw: RawCapacity, depots: &[super::Depot]) -> Result<CapacitySettings, String> {
    for code in raw.depots.keys() {
        if !depots.iter().any(|d| d.code == *code) {
            return Err(format!("capacity.depots.{code}: not a depot of the area ([[warehouses]] code)"));
        }
    }
    for d in depots {
        let fleet = raw.depots.get(&d.code).copied().or(raw.mode) == Some(CapacityMode::Fleet);
        if fleet && d.location.is_none() {
            return Err(format!(
                "capacity: depot {} books on its fleet but has no coordinates ([[warehouses]] lat and lng)",
                d.code
            ));
        }
    }
    let unroutable = depots.iter().filter(|d| d.location.is_none()).map(|d| d.code.clone()).collect();
    Ok(CapacitySettings { configured: raw.mode, depots: raw.depots, install: CapacityMode::Limits, unroutable })
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
