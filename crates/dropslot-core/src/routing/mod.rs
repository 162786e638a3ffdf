//! Vehicle routing with time windows (VRPTW), pure: reading instances, the solver, and the
//! independent checker that judges any solver's routes (CONTRACT §12, issue 29).

pub mod check;
pub mod instance;
pub mod parse;
pub mod roads;
pub mod solver;

pub use check::{Verdict, check, check_fleet};
pub use instance::{Fixed, Format, Instance, Node, Tenths, Vehicle, show_tenths};
pub use parse::{ParseError, parse};
pub use solver::{Budget, Iterations, Reason, Solution, solve};
