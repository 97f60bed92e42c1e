//! Replays the fuzz corpus and regressions with plain `cargo test` (stable
//! toolchain, no cargo-fuzz): every file under `fuzz/corpus/<target>` and
//! `fuzz/regressions/<target>` runs through the target's check
//! (`commcheck::fuzz::check*`) against the correct CPU reference backend, and
//! must pass. (`report` inputs replay in `reports/tests/fuzz_replay.rs`,
//! where commcheck-report is.)
//!
//! - Every regression `<name>` has its decoded form beside it, `<name>.txt`
//!   (`commcheck::fuzz::describe`): decoding must still give exactly that
//!   text, or the versioned format changed under a stored input. A missing
//!   one is written with `COMMCHECK_BLESS=1` (an existing one is never
//!   rewritten).
//! - A regression named `defect-<Defect>-...` is an input the fuzzer found
//!   for that planted defect: it must also still fail on the CPU backend
//!   built with it (up to ten runs, and settled, for timing-window defects;
//!   see [`still_fails`]).
//!
//! `cargo test --test fuzz_replay -- --ignored --exact write_seeds` rewrites
//! the seed inputs (`fuzz/corpus/<target>/seed-*`) from the structured
//! inputs below (how the corpus is migrated to a new format version).

use std::path::{Path, PathBuf};

use commcheck::fuzz::{self, DeadlineCase, Frame, Program, ReleaseAt, Role, Target};
use commcheck::model::{Header, Mode, Op, Timeout, Work};
use commcheck_cpu::Defect;
use commcheck_reference::cpu::CpuHarness;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn check(target: Target, harness: &CpuHarness, data: &[u8]) -> Result<(), fuzz::Failure> {
    match target {
        Target::Sequence => fuzz::check(harness, data),
        Target::Boundary => fuzz::check_boundary(harness, data),
        Target::Deadlines => fuzz::check_deadlines(harness, data),
        Target::Report => Ok(()),
    }
}

/// The defect a regression's name says it was found for.
fn defect_of(path: &Path) -> Option<Defect> {
    let name = path.file_name()?.to_str()?.strip_prefix("defect-")?;
    let defect = name.split('-').next()?;
    Defect::ALL.iter().copied().find(|d| d.name() == defect)
}

/// Replays every input of `target`; returns one line per problem.
fn replay(target: Target) -> Vec<String> {
    let mut problems = Vec::new();
    let correct = CpuHarness::new();
    let mut replayed = 0;
    for kind in ["corpus", "regressions"] {
        for path in commcheck::fuzz::stored_inputs(&root().join(kind).join(target.name())) {
            let shown = path.strip_prefix(root()).unwrap_or(&path).display();
            let data = match std::fs::read(&path) {
                Ok(data) => data,
                Err(error) => {
                    problems.push(format!("{shown}: unreadable: {error}"));
                    continue;
                }
            };
            replayed += 1;
            if let Err(failure) = check(target, &correct, &data) {
                problems.push(format!("{shown}: fails on the correct backend: {failure}"));
            }
            if kind == "regressions" {
                problems.extend(decoded_form(target, &path, &data));
                if let Some(defect) = defect_of(&path) {
                    if !still_fails(target, defect, &data) {
                        problems.push(format!(
                            "{shown}: found for {defect}, but passes on it now ({REPLAY_RUNS} runs and {REPLAY_BUDGET:?} at least, settled too)"
                        ));
                    }
                }
            }
        }
    }
    println!("{target}: {replayed} stored input(s) replayed");
    problems
}

/// Whether `data` still fails on `defect`. An input found for a
/// timing-window defect (`is_complete` on work that has just started, a
/// deadline reported a little early) in the fuzzer's optimised build may
/// need a moment more in a debug one, or a moment less on a loaded machine:
/// a sequence that does not settle is also tried settled (the same
/// operations, 1 ms after each submission and release), and the runs go on,
/// alternating, until one fails or [`REPLAY_RUNS`] runs and
/// [`REPLAY_BUDGET`] have passed. A defect's failure only ever shows when
/// the run is fast enough to see it (a deadline kept on a busy machine looks
/// kept): more runs give the scheduler more chances, and no run can show a
/// failure that is not there.
fn still_fails(target: Target, defect: Defect, data: &[u8]) -> bool {
    let harness = CpuHarness::with_defect(defect);
    let settled = match fuzz::decode(target, data) {
        Ok(fuzz::Input::Sequence(program)) if !program.settle => Some(
            Program {
                settle: true,
                ..program
            }
            .encode(),
        ),
        _ => None,
    };
    let forms: Vec<&[u8]> = std::iter::once(data).chain(settled.as_deref()).collect();
    let started = std::time::Instant::now();
    for run in 0.. {
        if check(target, &harness, forms[run % forms.len()]).is_err() {
            return true;
        }
        if run + 1 >= REPLAY_RUNS && started.elapsed() >= REPLAY_BUDGET {
            break;
        }
    }
    false
}

/// Runs of a defect's regression before [`still_fails`] may give up.
const REPLAY_RUNS: usize = 20;

/// How long [`still_fails`] keeps trying once [`REPLAY_RUNS`] are done.
const REPLAY_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);

/// The regression's stored decoded form is what it decodes to today.
fn decoded_form(target: Target, path: &Path, data: &[u8]) -> Option<String> {
    let decoded = fuzz::describe(target, data);
    let mut form = path.as_os_str().to_owned();
    form.push(".txt");
    let form = PathBuf::from(form);
    match std::fs::read_to_string(&form) {
        Ok(stored) if stored == decoded => None,
        Ok(stored) => Some(format!(
            "{}: decodes differently from its stored form (the format changed under a stored input; \
             a change must be a new format version):\n--- stored\n{stored}\n--- now\n{decoded}",
            form.display()
        )),
        Err(_) if std::env::var_os("COMMCHECK_BLESS").is_some() => {
            std::fs::write(&form, decoded).err().map(|error| {
                format!("{}: cannot be written: {error}", form.display())
            })
        }
        Err(_) => Some(format!(
            "{}: missing (the decoded form of every regression is stored beside it; \
             COMMCHECK_BLESS=1 writes it)",
            form.display()
        )),
    }
}

fn assert_replays(target: Target) {
    let problems = replay(target);
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn sequence_inputs_replay() {
    assert_replays(Target::Sequence);
}

#[test]
fn boundary_inputs_replay() {
    assert_replays(Target::Boundary);
}

#[test]
fn deadlines_inputs_replay() {
    assert_replays(Target::Deadlines);
}

/// `report` regressions keep their decoded form too (they run in
/// commcheck-report's own replay test).
#[test]
fn report_regressions_keep_their_decoded_form() {
    let folder = root().join("regressions").join("report");
    let problems: Vec<String> = commcheck::fuzz::stored_inputs(&folder)
        .iter()
        .filter_map(|path| {
            let data = std::fs::read(path).ok()?;
            decoded_form(Target::Report, path, &data)
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// Every target has a seeded corpus.
#[test]
fn every_target_has_a_corpus() {
    for target in Target::ALL {
        let folder = root().join("corpus").join(target.name());
        assert!(
            !commcheck::fuzz::stored_inputs(&folder).is_empty(),
            "{} has no input",
            folder.display()
        );
    }
}

// ---------------------------------------------------------------------------
// Seeds.

fn submit(work: Work) -> Op {
    Op::Submit {
        work,
        lane: 0,
        fault: false,
    }
}

/// A few small sequences: each kind of work released and waited for, a
/// quarantine, a native cancellation, lanes and ordering, retention.
fn sequence_seeds() -> Vec<(&'static str, Program)> {
    let released = |work| {
        Program::new(vec![
            submit(work),
            Op::Release { sub: 0 },
            Op::Wait { sub: 0 },
        ])
    };
    vec![
        ("local", released(Work::LocalDependencies)),
        ("submit", released(Work::Submit)),
        ("operations", every_operation()),
        (
            "gather",
            released(Work::UnevenGather {
                counts: [1, 2],
                width: 1,
            }),
        ),
        (
            "all-to-all",
            released(Work::AllToAll {
                sends: [[1, 0], [2, 1]],
                width: 0,
            }),
        ),
        ("broadcast", released(Work::Broadcast { root: 1 })),
        (
            "agree",
            released(Work::Agree {
                votes: [true, true],
            }),
        ),
        (
            "send-receive",
            released(Work::SendReceive {
                values: 1,
                header: Header::Matching,
            }),
        ),
        (
            "quarantine",
            Program::new(vec![
                submit(Work::Operation(0)),
                Op::WaitBounded {
                    sub: 0,
                    timeout: Timeout::Short,
                    mode: Mode::Quarantine,
                },
                Op::Release { sub: 0 },
            ]),
        ),
        (
            "native-cancel",
            Program::new(vec![
                submit(Work::LocalDependencies),
                Op::DropOutputs { sub: 0 },
                Op::WaitBounded {
                    sub: 0,
                    timeout: Timeout::Nanosecond,
                    mode: Mode::NativeCancel,
                },
            ]),
        ),
        (
            // A consumer ordered after a held producer on another lane, and
            // released first: it must not complete before its producer.
            "lanes",
            Program::new(vec![
                Op::Fork { count: 2 },
                submit(Work::Submit),
                Op::Retain { sub: 0 },
                Op::OrderAfter { sub: 0, lane: 0 },
                Op::Submit {
                    work: Work::Submit,
                    lane: 1,
                    fault: false,
                },
                Op::Release { sub: 1 },
                Op::IsComplete { sub: 1 },
                Op::LateRelease { sub: 0, delay: 3 },
                Op::Wait { sub: 1 },
                Op::DropCompletion { sub: 0 },
            ]),
        ),
        (
            // Format 2: a fork dropped with held work queued on it, which
            // must still complete once released (RET-2).
            "drop-lane",
            Program::new(vec![
                Op::Fork { count: 1 },
                Op::Submit {
                    work: Work::Submit,
                    lane: 1,
                    fault: false,
                },
                Op::DropLane { lane: 0 },
                Op::Release { sub: 0 },
                Op::Wait { sub: 0 },
            ]),
        ),
        (
            // Format 2: empty local dependencies, lazy values, refused
            // submissions of both APIs, on idle lanes (EXC-10, SUB-2, SUB-4).
            "idle-lanes",
            Program::new(vec![
                Op::EmptyLocal { lane: 0 },
                Op::SubmitLazy { lane: 0 },
                Op::Refused {
                    local: true,
                    lane: 0,
                },
                Op::Refused {
                    local: false,
                    lane: 0,
                },
                submit(Work::Submit),
                Op::Release { sub: 0 },
                Op::Wait { sub: 0 },
                Op::EmptyLocal { lane: 0 },
            ]),
        ),
        (
            // Format 2: RET-2's and SUB-3's shapes, one operation each.
            "shapes",
            Program::new(vec![
                Op::DropQueued { lane: 0 },
                Op::OrderedPair { lane: 0 },
                Op::IsComplete { sub: 2 },
                Op::Release { sub: 1 },
                Op::Wait { sub: 2 },
            ]),
        ),
        (
            // Format 2: empty local dependencies and lazy values on a fork
            // while held work waits on the rank's own lane: independent
            // lanes let them complete at once (SUB-1).
            "busy-lanes",
            Program::new(vec![
                Op::Fork { count: 1 },
                submit(Work::Submit),
                Op::EmptyLocal { lane: 1 },
                Op::SubmitLazy { lane: 1 },
                Op::Release { sub: 0 },
                Op::Wait { sub: 0 },
            ]),
        ),
        (
            "three-ranks",
            Program {
                ranks: 3,
                ..every_operation()
            },
        ),
        (
            "four-ranks",
            Program {
                ranks: 4,
                ..every_operation()
            },
        ),
    ]
}

/// Every claimed operation's standard submission, released and waited for.
fn every_operation() -> Program {
    let mut ops = Vec::new();
    for (sub, index) in (0..8u8).enumerate() {
        let sub = sub as u8;
        ops.extend([
            submit(Work::Operation(index)),
            Op::Release { sub },
            Op::Wait { sub },
        ]);
    }
    Program::new(ops)
}

fn deadline_seeds() -> Vec<(&'static str, DeadlineCase)> {
    let case = |work, timeout, mode, release| DeadlineCase {
        work,
        timeout,
        mode,
        release,
        delay: 10,
        fault: false,
        poll_first: false,
        drop_outputs_first: false,
    };
    vec![
        (
            "nanosecond-native",
            case(
                Work::Operation(0),
                Timeout::Nanosecond,
                Mode::NativeCancel,
                ReleaseAt::Before,
            ),
        ),
        (
            "max-quarantine",
            case(
                Work::Operation(1),
                Timeout::Unbounded,
                Mode::Quarantine,
                ReleaseAt::During,
            ),
        ),
        (
            "millisecond-local",
            case(
                Work::LocalDependencies,
                Timeout::Exact(std::time::Duration::from_millis(1)),
                Mode::Quarantine,
                ReleaseAt::After,
            ),
        ),
        (
            "year-native",
            case(
                Work::Operation(2),
                Timeout::Exact(std::time::Duration::from_secs(365 * 24 * 3600)),
                Mode::NativeCancel,
                ReleaseAt::During,
            ),
        ),
    ]
}

fn role(name: &str, shape: Vec<usize>, values: Vec<f32>) -> Role {
    Role {
        name: name.into(),
        dtype: 1,
        declared: shape.clone(),
        tensor: shape,
        values,
    }
}

fn boundary_seeds() -> Vec<(&'static str, fuzz::BoundaryCase)> {
    let frame = |route, roles| Frame {
        route,
        schema: "h.state".into(),
        roles,
    };
    let one = frame(
        3,
        vec![role("hidden", vec![2, 2], vec![1.0, -2.5, 0.0, 4.0])],
    );
    let two = frame(
        5,
        vec![
            role("hidden", vec![3], vec![1.0, 2.0, 3.0]),
            role("mask", vec![1, 2], vec![f32::NAN, -0.0]),
        ],
    );
    vec![
        (
            "one-value",
            fuzz::BoundaryCase {
                route: 3,
                sender_first: true,
                sender: one.clone(),
                receiver: one,
            },
        ),
        (
            "two-values",
            fuzz::BoundaryCase {
                route: 5,
                sender_first: false,
                sender: two.clone(),
                receiver: two,
            },
        ),
    ]
}

/// Writes the seeds of the `sequence`, `deadlines` and `boundary` corpora
/// (`report`'s are written by commcheck-report's replay test).
#[test]
#[ignore = "writes fuzz/corpus/*/seed-*: run on purpose"]
fn write_seeds() {
    let write = |target: Target, name: &str, bytes: Vec<u8>| {
        let folder = root().join("corpus").join(target.name());
        std::fs::create_dir_all(&folder).expect("corpus folder");
        std::fs::write(folder.join(format!("seed-{name}")), bytes).expect("seed written");
    };
    for (name, program) in sequence_seeds() {
        write(Target::Sequence, name, program.encode());
    }
    for (name, case) in deadline_seeds() {
        write(Target::Deadlines, name, case.encode());
    }
    for (name, case) in boundary_seeds() {
        write(Target::Boundary, name, case.encode());
    }
}

/// The seeds decode to what they were written from, and pass.
#[test]
fn seeds_decode_to_their_inputs() {
    for (name, program) in sequence_seeds() {
        let decoded = fuzz::decode(Target::Sequence, &program.encode());
        assert_eq!(decoded, Ok(fuzz::Input::Sequence(program)), "{name}");
    }
    for (name, case) in deadline_seeds() {
        let decoded = fuzz::decode(Target::Deadlines, &case.encode());
        assert_eq!(decoded, Ok(fuzz::Input::Deadlines(case)), "{name}");
    }
    for (name, case) in boundary_seeds() {
        let decoded = fuzz::decode(Target::Boundary, &case.encode());
        assert_eq!(decoded, Ok(fuzz::Input::Boundary(case)), "{name}");
    }
}

/// The format-2 seeds reach what format 1 could not: each fails on the
/// planted defect of the operation it adds, naming that defect's invariant,
/// on its first run. Every pair here fails whatever the scheduling: the
/// defect breaks something the model waits for (work that must complete,
/// fails or never does) or a value it reads. `OrderAfterIgnored` is not
/// here: the `shapes` seed shows it only when the backend's lane ran the
/// consumer before the model looked, which load can delay without limit (a
/// correct backend gives the model nothing to wait for); SUB-3's catalogue
/// case (`tests/mutants`) and `fuzz/defects.sh` prove that defect.
#[test]
fn format_2_seeds_find_what_format_1_could_not() {
    let seeds = sequence_seeds();
    let seed = |name: &str| {
        seeds
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, program)| program.encode())
            .expect("seed")
    };
    for (name, defect) in [
        ("drop-lane", Defect::ExecutorNotRetained),
        ("idle-lanes", Defect::EmptyLocalDepsHang),
        ("idle-lanes", Defect::SubmitSkipsEvaluation),
        ("idle-lanes", Defect::SubmitErrorLeavesWork),
        ("busy-lanes", Defect::ForkSharesLane),
        ("shapes", Defect::ExecutorNotRetained),
    ] {
        let failure = check(
            Target::Sequence,
            &CpuHarness::with_defect(defect),
            &seed(name),
        )
        .err()
        .unwrap_or_else(|| panic!("{name} passes on {defect:?}"));
        assert_eq!(
            failure.id,
            Some(defect.invariant()),
            "{name} on {defect:?}: {failure}"
        );
    }
}
