//! BRD mutants (being written).

crate::mutants! {}
