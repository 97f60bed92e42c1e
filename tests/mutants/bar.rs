//! BAR mutants (being written).

crate::mutants! {}
