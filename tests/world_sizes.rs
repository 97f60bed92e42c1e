//! A harness declares the world sizes it builds in one process: a case whose
//! sizes are all outside them is `not-supported` naming the sizes, a case that
//! ran records the sizes it ran on, and no case fails because of world size.

use commcheck::{catalogue, run_cases, Instruments, Verdict, WorldSizes};
use commcheck_reference::cpu::CpuHarness;

#[test]
fn a_size_one_harness_gets_no_failure_from_world_size() {
    let harness = CpuHarness::new()
        .with_instruments(Instruments::NONE)
        .with_world_sizes(WorldSizes::UpTo(1));
    for case in catalogue(&harness) {
        assert!(
            case.worlds().iter().all(|&n| n == 1),
            "{}: {:?}",
            case.name(),
            case.worlds()
        );
    }
    let results = run_cases(harness, |_| true).expect("the COMMCHECK_* settings are valid");
    for line in results.family_summary() {
        println!("{line}");
    }
    let mut ran_sizes = 0;
    for case in &results.cases {
        assert!(
            !case.verdict.is_failure() && case.verdict != Verdict::Inconclusive,
            "{} {}: {:?}",
            case.name,
            case.verdict,
            case.message
        );
        match case.verdict {
            Verdict::Pass => {
                assert_eq!(case.worlds, vec![1], "{}", case.name);
                ran_sizes += 1;
            }
            _ => assert!(
                case.worlds.iter().all(|&n| n == 1),
                "{}: {:?}",
                case.name,
                case.worlds
            ),
        }
    }
    assert!(ran_sizes > 0);
    // SUM-1 runs on worlds of 1, 2, 3, 4 and 8 ranks: here on 1 only.
    let sum = results
        .cases
        .iter()
        .find(|case| case.name == "SUM-1::all_reduce_sum")
        .expect("SUM-1 case");
    assert_eq!((sum.verdict, sum.worlds.clone()), (Verdict::Pass, vec![1]));
    let sized_out = results
        .cases
        .iter()
        .find(|case| case.name == "EXC-1::all_reduce_sum")
        .expect("EXC-1 case");
    let message = sized_out.message.clone().unwrap_or_default();
    assert!(
        sized_out.verdict == Verdict::NotSupported && message.contains("size 1 only"),
        "{sized_out:?}"
    );
}
