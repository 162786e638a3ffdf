//! Being ported from `store/sqlite/webhooks.rs` (issue 10).
#![allow(dead_code, unused_imports)]
