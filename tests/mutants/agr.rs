//! AGR mutants (being written).

crate::mutants! {}
