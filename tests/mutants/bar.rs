//! BAR mutants.

crate::mutants! {
    bar_1_barrier_early => BarrierEarly,
}
