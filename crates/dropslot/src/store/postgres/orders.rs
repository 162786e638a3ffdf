//! Being ported from `store/sqlite/orders.rs` (issue 10).
#![allow(dead_code, unused_imports)]
