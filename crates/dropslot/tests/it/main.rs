//! The end-to-end suite, one test binary: the real server over real HTTP on a fresh
//! database per test (`DROPSLOT_TEST_DATABASE_URL` picks the backend; default a temporary
//! `SQLite` file), and the real binary for the CLI. Tests that only make sense on `SQLite` (the
//! kill -9 of the group-commit writer, file locks) say so in their name and skip elsewhere.

mod async_orders;
mod attempts;
mod attempts_store;
mod backup;
mod browser;
mod capacity;
mod change_page;
mod cli;
mod common;
mod copy;
mod dashboard;
mod dashboard_http;
mod day_runs;
mod driver_api;
mod driver_app;
mod driver_proofs;
mod errors;
mod eta;
mod first_start;
mod fleet;
mod fleet_capacity;
mod hardening;
mod labels;
mod layout;
mod live_board;
mod metrics;
mod new_time;
mod notifications;
mod openapi;
mod ops;
mod ops_pages;
mod orders;
mod plans;
mod points;
mod preview;
mod publishable;
mod ratelimit;
mod reads;
mod receiver;
mod reports;
mod required;
mod returns;
mod roads;
mod sandbox;
mod scaleout;
mod solve;
mod spreadsheet;
mod storage;
mod systemd;
mod webhooks;
