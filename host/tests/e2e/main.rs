//! End-to-end tests of the `weft` binary, compiled as one test binary (as
//! ripgrep does) so the suite links once. Each module covers one area; the
//! helpers in `common` start the real binary against a fresh data directory.

#[macro_use]
mod common;

mod a2a;
mod a2a_steps;
mod api;
mod api_clients;
mod artifacts;
mod beside_restate;
mod caps;
mod chains;
mod children;
mod client_paths;
mod compare;
mod conditions;
mod csrf;
mod defaults;
mod disk_full;
mod early;
mod edges;
mod examples;
mod floods;
mod guest_sdk;
mod idempotent;
mod labels;
mod load;
mod notify;
mod otlp;
mod plugins;
mod postgres;
mod readme;
mod recordings;
mod recovery;
mod retry;
mod runs;
mod schedules;
mod secrets;
mod serve;
mod serve_agent;
mod serve_limits;
mod serve_progress;
mod serve_proxy;
mod serve_recording;
mod serve_tasks;
mod serve_waits;
mod sleep;
mod sleepers;
mod step_cli;
mod telemetry;
mod tools;
mod tools_chaos;
mod validate;
mod waits;
mod web;
