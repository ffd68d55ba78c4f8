//! The binary's offline commands: `mutate` (acceptance, stdin, exit
//! codes, help), its YAML reader, `certs`, and the golden fixtures through
//! the CLI and the AdmissionReview path.

mod audit;
mod certs;
mod golden;
mod mutate;
mod reader;
