//! Your backend. The template certifies commcheck's CPU reference backend as
//! a stand-in: `tests/commcheck.rs` names its types. Put your backend here
//! (or depend on it), and name its types there instead.

pub use commcheck_cpu as stand_in;
