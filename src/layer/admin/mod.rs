//! The proxy's own HTTP endpoints, beside the model routes: liveness,
//! readiness, metrics and the preset list ([`endpoints`]), dry-run
//! ([`dry_run`]), and the inspector's pages and API ([`inspector`]; what
//! it records is `crate::observe::inspector`'s).

pub(crate) mod dry_run;
pub(crate) mod endpoints;
pub(crate) mod inspector;

pub(crate) use inspector::Throttle;
