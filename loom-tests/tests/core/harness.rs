//! What model threads hold and touch: loom objects leaked rather than
//! dropped while a failing model unwinds, threads whose unstarted closures
//! are leaked likewise, and retained resources that check, as they are
//! dropped, that no native work still uses them.

use commcheck_cpu::loom_core::Retained;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;

/// A loom object held by a model thread: dropped as usual, but leaked while
/// the thread unwinds from a failure. After a deadlock loom has no active
/// thread, and dropping a loom object then would abort the test process
/// instead of reporting the failure.
pub(crate) struct Leak<T>(Option<T>);

impl<T> Leak<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(Some(value))
    }
}

/// A new loom `Arc` held as a [`Leak`].
pub(crate) fn shared<T>(value: T) -> Leak<Arc<T>> {
    Leak::new(Arc::new(value))
}

impl<T> std::ops::Deref for Leak<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("a live value")
    }
}

impl<T: Clone> Clone for Leak<T> {
    fn clone(&self) -> Self {
        Self::new(T::clone(self))
    }
}

impl<T> Drop for Leak<T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::mem::forget(self.0.take());
        }
    }
}

/// `loom::thread::spawn`, except that a closure loom has not started yet
/// when the model panics is leaked, not dropped: it holds loom objects, and
/// dropping those outside the model would abort the test process instead
/// of reporting the failure.
pub(crate) fn spawn<F>(f: F) -> thread::JoinHandle<()>
where
    F: FnOnce() + Send + 'static,
{
    let f = std::mem::ManuallyDrop::new(f);
    thread::spawn(move || std::mem::ManuallyDrop::into_inner(f)())
}

/// A retained native resource: counts its drops and checks, as it is
/// dropped, that no native work still uses it (`invariant` names the claim).
pub(crate) struct Resource {
    drops: Leak<Arc<AtomicUsize>>,
    live: Leak<Arc<AtomicBool>>,
    invariant: &'static str,
}

impl Drop for Resource {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        assert!(
            !self.live.load(SeqCst),
            "{} violated: a retained value was released while native work uses it",
            self.invariant
        );
        self.drops.fetch_add(1, SeqCst);
    }
}

pub(crate) fn resource(
    drops: &Leak<Arc<AtomicUsize>>,
    live: &Leak<Arc<AtomicBool>>,
    invariant: &'static str,
) -> Retained {
    Box::new(Resource {
        drops: drops.clone(),
        live: live.clone(),
        invariant,
    })
}

/// What native work does with its retained values: touch them, which must
/// find them alive.
pub(crate) fn touch(drops: &AtomicUsize, invariant: &str) {
    assert_eq!(
        drops.load(SeqCst),
        0,
        "{invariant} violated: native work touches a retained value that was already released"
    );
}
