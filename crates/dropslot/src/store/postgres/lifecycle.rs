//! Being ported from `store/sqlite/lifecycle.rs` (issue 10).
#![allow(dead_code, unused_imports)]
