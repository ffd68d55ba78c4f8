//! The webhook server: the router through `oneshot` (admission, errors,
//! limits, admin), and over real sockets what only sockets show (TLS and its
//! reload, HTTP/2 limits, drain, connection caps, attacks), plus the
//! `serve` flags.

mod admin_port;
mod answers;
mod args;
mod attacks;
mod bounded_logs;
mod cap;
mod drain;
mod fair;
mod files;
mod http;
mod keepalive;
mod kserve_version;
mod memory;
mod pending_certs;
mod proven_certs;
mod reloader_fifo;
mod router;
mod shadow;
mod slots;
mod support;
mod tls;
