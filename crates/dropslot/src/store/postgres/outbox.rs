//! Being ported from `store/sqlite/outbox.rs` (issue 10).
#![allow(dead_code, unused_imports)]
