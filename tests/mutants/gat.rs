//! GAT mutants.

crate::mutants! {
    gat_1_gather_reversed => GatherReversed,
    gat_2_uneven_counts_as_elements => UnevenCountsAsElements,
}
