//! The FFI edge: every `unsafe` block of the crate is here, each with a
//! `SAFETY` note. Everything above this module is safe Rust.
//!
//! One child per surface of the driver API it wraps:
//!
//! - `library`: whether `libcuda` and `libnvrtc` load, and their versions;
//! - `context`: context-wide settings made when a device opens;
//! - `memory`: device memory ([`DeviceMemory`]);
//! - `host`: pinned, device-mapped host memory ([`HostPool`], [`HostSlot`]);
//! - `event`: events with any flags ([`Event`]);
//! - `layout`: the structs the kernels share with the host
//!   ([`RankAddresses`], [`Segment`], [`share`]);
//! - `launch`: kernel launches ([`Launch`], [`launch()`]).
#![allow(unsafe_code)]

mod context;
mod event;
mod host;
mod launch;
mod layout;
mod library;
mod memory;

pub use context::{disable_event_tracking, keep_pool_memory};
pub use event::Event;
pub use host::{HostPool, HostSlot};
pub use launch::{launch, Launch};
pub use layout::{share, RankAddresses, Segment, MAX_RANKS, SHARE_ALIGN};
pub use library::{driver_library_present, driver_version, nvrtc_library_present, nvrtc_version};
pub use memory::DeviceMemory;
