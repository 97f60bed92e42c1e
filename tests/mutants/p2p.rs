//! P2P mutants (being written).

crate::mutants! {}
