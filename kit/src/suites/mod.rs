//! The invariant suites, one module per SPEC family. Each module exposes
//! `rows()`: its invariants, which subjects they apply to, which instruments
//! they need, and the script that checks them.
//!
//! The files form a one-way stack: the family suites (and RET, EXC, CAN,
//! SUB) use the shared layers below them, never the reverse, and none of
//! them uses this file. From the bottom: [`seeds`] (seeded draws and the
//! suites' historical data), [`scenario`] (the value checks' data and their
//! one verifier), `exact` (outputs read back and compared), `choreography`
//! (how ranks take turns), `values` (running scenarios on a backend);
//! beside them `common` (helpers of every suite) and `blocker` (work that
//! keeps a lane busy).

pub(crate) mod a2a;
pub(crate) mod agr;
pub(crate) mod bar;
mod blocker;
pub(crate) mod brd;
pub(crate) mod can;
mod choreography;
mod common;
mod exact;
pub(crate) mod exc;
pub(crate) mod gat;
pub(crate) mod p2p;
pub(crate) mod ret;
pub(crate) mod scenario;
mod seeds;
pub(crate) mod sub;
pub(crate) mod sum;
mod values;
