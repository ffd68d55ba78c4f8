//! Fixed limits shared by the flags (which validate against them) and the
//! server (which enforces them); a module of its own so neither imports the
//! other for them.

/// controller-runtime's limit: etcd stores objects up to 1.5 MiB, JSON can
/// roughly double that, and an UPDATE carries object and oldObject.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
