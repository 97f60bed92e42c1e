//! GAT mutants (being written).

crate::mutants! {}
