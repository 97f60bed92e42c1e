//! What a run's value checks cover ([`DataCoverage`]): the dtypes a harness
//! declares and the size sweep the value suites run on each, for the
//! records and reports.

use crate::dtype::Dtype;
use crate::harness::Harness;
use crate::results::{DataCoverage, Sweep};
use crate::suites::scenario;

/// The worlds the size sweep runs on for a harness that builds `sizes`:
/// [`scenario::SWEEP_WORLDS`] and the largest of the value checks' worlds.
fn sweep_worlds(sizes: crate::WorldSizes) -> Vec<usize> {
    let largest = scenario::VALUE_WORLDS
        .iter()
        .copied()
        .filter(|&n| sizes.contains(n))
        .max()
        .unwrap_or(0);
    let mut worlds: Vec<usize> = scenario::SWEEP_WORLDS
        .iter()
        .copied()
        .filter(|&n| sizes.contains(n))
        .collect();
    if scenario::sweeps_on(largest, largest) && !worlds.contains(&largest) {
        worlds.push(largest);
    }
    worlds
}

impl DataCoverage {
    /// What `harness` declares: its dtypes (in the kit's order) and each
    /// one's sweep.
    pub fn of<H: Harness>(harness: &H) -> Self {
        let offered = harness.dtypes();
        let dtypes: Vec<Dtype> = Dtype::ALL
            .into_iter()
            .filter(|dtype| offered.contains(dtype))
            .collect();
        let sweeps = dtypes
            .iter()
            .map(|&dtype| {
                let boundaries = harness.boundaries(dtype);
                let (elements, skipped) =
                    scenario::sweep(dtype, &boundaries, harness.max_message_bytes());
                Sweep {
                    dtype,
                    boundaries,
                    elements,
                    skipped,
                }
            })
            .collect();
        Self {
            dtypes,
            sweep_worlds: sweep_worlds(harness.world_sizes()),
            sweeps,
        }
    }

    /// One line for reports: dtypes, and each sweep's sizes.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.dtypes.iter().map(|d| d.name()).collect();
        let sweeps: Vec<String> = self
            .sweeps
            .iter()
            .map(|sweep| {
                let largest = sweep.elements.iter().max().copied().unwrap_or(0);
                let mut line = format!(
                    "{}: {} sizes, {:?} elements (largest {} bytes per rank)",
                    sweep.dtype,
                    sweep.elements.len(),
                    sweep.elements,
                    largest * sweep.dtype.size()
                );
                if !sweep.skipped.is_empty() {
                    line.push_str(&format!(
                        "; {:?} skipped for the harness's limit",
                        sweep.skipped
                    ));
                }
                line
            })
            .collect();
        format!(
            "dtypes {}; size sweep on worlds of {:?} (the largest size on a world of {} only, a world beyond {:?} in f32 only): {}",
            names.join(", "),
            self.sweep_worlds,
            scenario::LARGEST_WORLD,
            scenario::SWEEP_WORLDS,
            sweeps.join("; ")
        )
    }
}
