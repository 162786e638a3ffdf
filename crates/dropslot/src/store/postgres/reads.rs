//! Being ported from `store/sqlite/reads.rs` (issue 10).
#![allow(dead_code, unused_imports)]
