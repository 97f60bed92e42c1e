//! The runner survives hostile backends: a `wait` that never returns, a
//! `Drop` that blocks forever, a panic while holding a lock, and (with process
//! isolation) an abort. Each is a harness built for the purpose around the
//! CPU backend; the run must go on and report `timeout` or `crash`.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use commcheck::{
    run_cases, Claims, CompletionRef, Dtype, Harness, HarnessError, HoldGuard, HostValues,
    Identity, Instruments, Ledger, Observer, Probe, Verdict, WireRecord,
};
use commcheck_cpu::{CpuBackend, CpuExecutor, CpuGroup, CpuRoute, CpuTensor, Element};
use commcheck_reference::cpu::{CpuHarness, CpuRank, CpuWorld};
use libtest_mimic::{Arguments, Failed, Trial};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Held work is never released, so `wait` on it never returns.
    WaitNeverReturns,
    /// [`Mode::WaitNeverReturns`] on the `spin-wait` personality: the
    /// `wait` that never returns polls in a busy loop, burning CPU.
    WaitSpinsForever,
    /// Dropping a rank's state blocks forever.
    DropBlocks,
    /// Making a tensor panics while holding a lock.
    PanicsHoldingLock,
    /// Making a tensor aborts the process.
    Aborts,
    /// The harness cannot build a world.
    WorldFails,
    /// The harness cannot build a tensor.
    TensorFails,
    /// `Harness::world` panics.
    WorldPanics,
    /// `Harness::rank` panics.
    RankPanics,
    /// The harness declares every instrument, but its probe answers nothing.
    ProbeDeclaredButAbsent,
    /// No instruments, and every matrix product fails (square tensors come
    /// out one column wider), so no lazy work can keep local work pending.
    LazyWorkFails,
    /// Offers every dtype, but builds its `bf16` tensors as `f16` ones.
    Bf16BuiltAsF16,
    /// Offers every dtype; the backend refuses to communicate `bf16`.
    Bf16Refused,
    /// Accepts messages of at most 64 KiB per rank.
    SmallMessages,
    /// Builds its groups "in another member order" in world order.
    OrderIgnored,
}

impl Mode {
    fn parse(name: &str) -> Option<Self> {
        [
            Self::WaitNeverReturns,
            Self::WaitSpinsForever,
            Self::DropBlocks,
            Self::PanicsHoldingLock,
            Self::Aborts,
            Self::WorldFails,
            Self::TensorFails,
            Self::WorldPanics,
            Self::RankPanics,
            Self::ProbeDeclaredButAbsent,
            Self::LazyWorkFails,
            Self::Bf16BuiltAsF16,
            Self::Bf16Refused,
            Self::SmallMessages,
            Self::OrderIgnored,
        ]
        .into_iter()
        .find(|mode| format!("{mode:?}") == name)
    }
}

struct Hostile {
    inner: CpuHarness,
    mode: Mode,
    lock: Arc<Mutex<()>>,
}

impl Hostile {
    fn new(mode: Mode) -> Self {
        Self {
            inner: match mode {
                Mode::Bf16Refused => CpuHarness::new().refusing(Element::Bf16),
                Mode::WaitSpinsForever => CpuHarness::new()
                    .with_personality("spin-wait")
                    .expect("spin-wait is a CPU personality"),
                _ => CpuHarness::new(),
            },
            mode,
            lock: Arc::new(Mutex::new(())),
        }
    }
}

struct HostileRank {
    inner: CpuRank,
    mode: Mode,
}

impl Drop for HostileRank {
    fn drop(&mut self) {
        if self.mode == Mode::DropBlocks {
            loop {
                std::thread::park();
            }
        }
    }
}

impl Harness for Hostile {
    type Backend = CpuBackend;
    type World = CpuWorld;
    type Rank = HostileRank;
    type Route = CpuRoute;

    fn identity(&self) -> Identity {
        Identity {
            name: format!("hostile-{:?}", self.mode),
            ..self.inner.identity()
        }
    }

    fn claims(&self) -> Claims<Self> {
        Claims::none().all()
    }

    /// Failing lazy work on one-rank worlds: no late peer can keep work
    /// pending there (a fed blocker or peer-fed local work), so the cases
    /// that need pending local work have only lazy work to use.
    fn world_sizes(&self) -> commcheck::WorldSizes {
        if self.mode == Mode::LazyWorkFails {
            commcheck::WorldSizes::UpTo(1)
        } else {
            self.inner.world_sizes()
        }
    }

    fn instruments(&self) -> Instruments {
        if self.mode == Mode::LazyWorkFails {
            Instruments::NONE
        } else {
            Instruments::ALL
        }
    }

    fn world(&self, ranks: usize) -> Result<CpuWorld, HarnessError> {
        if self.mode == Mode::WorldFails {
            return Err(HarnessError("no device available for a world".into()));
        }
        if self.mode == Mode::WorldPanics {
            panic!("hostile harness: world() panicked");
        }
        self.inner.world(ranks)
    }

    fn rank(&self, world: &CpuWorld, rank: usize) -> Result<HostileRank, HarnessError> {
        if self.mode == Mode::RankPanics {
            panic!("hostile harness: rank() panicked");
        }
        Ok(HostileRank {
            inner: self.inner.rank(world, rank)?,
            mode: self.mode,
        })
    }

    fn executor<'r>(&self, rank: &'r HostileRank) -> &'r CpuExecutor {
        self.inner.executor(&rank.inner)
    }

    fn context<'r>(&self, rank: &'r HostileRank) -> &'r CpuExecutor {
        self.inner.context(&rank.inner)
    }

    fn group<'r>(&self, rank: &'r HostileRank) -> &'r CpuGroup {
        self.inner.group(&rank.inner)
    }

    fn route(
        &self,
        rank: &HostileRank,
        id: u64,
        source: usize,
        destination: usize,
    ) -> Result<CpuRoute, HarnessError> {
        self.inner.route(&rank.inner, id, source, destination)
    }

    fn tensor(
        &self,
        rank: &HostileRank,
        values: &[f32],
        shape: &[usize],
    ) -> Result<CpuTensor, HarnessError> {
        match self.mode {
            Mode::PanicsHoldingLock => {
                let _held = self.lock.lock();
                panic!("hostile backend: panicked while holding a lock");
            }
            Mode::Aborts => std::process::abort(),
            Mode::TensorFails => Err(HarnessError("out of tensor memory".into())),
            Mode::LazyWorkFails if shape.len() == 2 => {
                let wider = [shape[0], shape[1] + 1];
                let values = vec![0.0; wider[0] * wider[1]];
                self.inner.tensor(&rank.inner, &values, &wider)
            }
            _ => self.inner.tensor(&rank.inner, values, shape),
        }
    }

    fn read(&self, rank: &HostileRank, tensor: &CpuTensor) -> Result<Vec<f32>, HarnessError> {
        self.inner.read(&rank.inner, tensor)
    }

    fn dtypes(&self) -> Vec<Dtype> {
        match self.mode {
            Mode::Bf16BuiltAsF16 | Mode::Bf16Refused | Mode::SmallMessages => self.inner.dtypes(),
            _ => vec![Dtype::F32],
        }
    }

    fn tensor_of(
        &self,
        rank: &HostileRank,
        values: &HostValues,
        shape: &[usize],
    ) -> Result<CpuTensor, HarnessError> {
        match (self.mode, values) {
            (Mode::Bf16BuiltAsF16, HostValues::Bf16(_)) => {
                let wrong = HostValues::narrow(Dtype::F16, &values.widen());
                self.inner.tensor_of(&rank.inner, &wrong, shape)
            }
            _ => self.inner.tensor_of(&rank.inner, values, shape),
        }
    }

    fn read_as(
        &self,
        rank: &HostileRank,
        tensor: &CpuTensor,
        dtype: Dtype,
    ) -> Result<HostValues, HarnessError> {
        self.inner.read_as(&rank.inner, tensor, dtype)
    }

    fn boundaries(&self, dtype: Dtype) -> Vec<usize> {
        self.inner.boundaries(dtype)
    }

    fn ordered_group(
        &self,
        rank: &HostileRank,
        key: u64,
        members: &[usize],
    ) -> Option<Result<commcheck::harness::OwnedGroup<Self>, HarnessError>> {
        if self.mode == Mode::OrderIgnored {
            let world: Vec<usize> = (0..members.len()).collect();
            return self.inner.ordered_group(&rank.inner, key, &world);
        }
        self.inner.ordered_group(&rank.inner, key, members)
    }

    fn max_message_bytes(&self) -> Option<usize> {
        (self.mode == Mode::SmallMessages).then_some(64 << 10)
    }

    fn hold(&self, rank: &HostileRank, executor: &CpuExecutor) -> Option<HoldGuard> {
        if matches!(self.mode, Mode::WaitNeverReturns | Mode::WaitSpinsForever) {
            // The native hold is never released: held work never completes.
            std::mem::forget(executor.hold());
            return Some(HoldGuard::new(|| {}));
        }
        self.inner.hold(&rank.inner, executor)
    }

    fn probe(&self, rank: &HostileRank, tensor: &CpuTensor) -> Option<Probe> {
        if self.mode == Mode::ProbeDeclaredButAbsent {
            return None;
        }
        self.inner.probe(&rank.inner, tensor)
    }

    fn ledger(&self, rank: &HostileRank) -> Option<Ledger> {
        self.inner.ledger(&rank.inner)
    }

    fn observer(&self, completion: CompletionRef<'_, Self>) -> Option<Observer> {
        Some(commcheck_reference::cpu::observer(match completion {
            CompletionRef::Plain(c) | CompletionRef::Communication(c) => c.observer(),
        }))
    }

    fn wire_log(&self, route: &CpuRoute) -> Option<Vec<WireRecord>> {
        self.inner.wire_log(route)
    }
}

/// Runs `cases` against `mode`; every verdict must be in `allowed`, and the
/// run must end (the watchdog bounds it).
fn survives(mode: Mode, cases: &[&str], allowed: &[Verdict]) -> Result<(), Failed> {
    let started = Instant::now();
    let results = run_cases(Hostile::new(mode), |case| {
        cases.contains(&case.name().as_str())
    })
    .expect("the COMMCHECK_* settings are valid");
    if results.cases.len() != cases.len() {
        return Err(format!("expected {} results, got {:?}", cases.len(), results.cases).into());
    }
    for case in &results.cases {
        if !allowed.contains(&case.verdict) {
            return Err(format!(
                "{mode:?}: {} was {} ({:?}), expected one of {allowed:?}",
                case.name, case.verdict, case.message
            )
            .into());
        }
        // A timeout says where each hung rank was: its last call into the
        // backend and the rank thread's backtrace there.
        let message = case.message.as_deref().unwrap_or_default();
        if case.verdict == Verdict::Timeout
            && !(message.contains("\n  rank 0: ") && message.contains("called from:\n"))
        {
            return Err(format!(
                "{mode:?}: the timeout of {} does not say where rank 0 was: {message:?}",
                case.name
            )
            .into());
        }
    }
    println!(
        "{mode:?}: run ended after {:?}: {:?}",
        started.elapsed(),
        results
            .cases
            .iter()
            .map(|c| (&c.name, c.verdict))
            .collect::<Vec<_>>()
    );
    // The process is still healthy: a correct backend still certifies here.
    let after = run_cases(CpuHarness::new(), |case| {
        case.name() == "EXC-10::local_dependencies"
    })
    .expect("the COMMCHECK_* settings are valid");
    match after.cases.first().map(|c| c.verdict) {
        Some(Verdict::Pass) => Ok(()),
        other => Err(format!("after the hostile run, a correct case gave {other:?}").into()),
    }
}

/// A broken harness yields a clear `fail` naming the case and the harness error.
fn broken_harness_fails_clearly(mode: Mode, error: &str) -> Result<(), Failed> {
    let case = "RET-1::local_dependencies";
    let results = run_cases(Hostile::new(mode), |c| c.name() == case)
        .expect("the COMMCHECK_* settings are valid");
    let result = results.cases.first().ok_or("no result")?;
    let message = result.message.clone().unwrap_or_default();
    if result.verdict != Verdict::Fail || !message.contains(case) || !message.contains(error) {
        return Err(format!(
            "{mode:?}: expected a fail naming {case} and {error:?}, got {} {message:?}",
            result.verdict
        )
        .into());
    }
    Ok(())
}

/// A harness that panics while building a world or a rank is a `crash`
/// naming the harness method, reported at once (not as a timeout).
fn harness_panic_is_a_crash(mode: Mode, method: &str) -> Result<(), Failed> {
    let case = "EXC-5::all_reduce_sum";
    let results = run_cases(Hostile::new(mode), |c| c.name() == case)
        .expect("the COMMCHECK_* settings are valid");
    let result = results.cases.first().ok_or("no result")?;
    let message = result.message.clone().unwrap_or_default();
    if result.verdict != Verdict::Crash || !message.contains(method) {
        return Err(format!(
            "{mode:?}: expected a crash naming {method}, got {} {message:?}",
            result.verdict
        )
        .into());
    }
    Ok(())
}

/// Lazy work that cannot be built (every product fails) makes the cases that
/// need pending local work `not-supported` with the error, quickly, never a
/// hang or a failure.
fn failing_lazy_work_is_not_supported() -> Result<(), Failed> {
    let started = Instant::now();
    // Cases that need pending local work, on one-rank worlds without the
    // hold: lazy work is all they have.
    let cases = [
        "SUB-1::fork_executors",
        "SUB-3::order_after",
        "RET-2::submit",
        "EXC-4::local_dependencies",
    ];
    let results = run_cases(Hostile::new(Mode::LazyWorkFails), |c| {
        cases.contains(&c.name().as_str())
    })
    .expect("the COMMCHECK_* settings are valid");
    for case in &results.cases {
        let message = case.message.clone().unwrap_or_default();
        if case.verdict != Verdict::NotSupported || !message.contains("matmul") {
            return Err(format!(
                "{}: expected not-supported naming the failing matmul, got {} {message:?}",
                case.name, case.verdict
            )
            .into());
        }
    }
    let calibration = results.calibration.ok_or("no calibration recorded")?;
    if calibration.unavailable.is_none() {
        return Err(format!("calibration should say why it failed: {calibration:?}").into());
    }
    println!(
        "failing lazy work: {:?} in {:?}",
        calibration.unavailable,
        started.elapsed()
    );
    Ok(())
}

/// The value checks of `mode`, on worlds of 2 (and the sweep): every one
/// must end as `verdict` with a message containing every one of `says`
/// (notes included).
fn value_checks(mode: Mode, verdict: Verdict, says: &[&str]) -> Result<(), Failed> {
    let cases = [
        "SUM-1::all_reduce_sum",
        "GAT-1::all_gather_even",
        "GAT-2::all_gather_uneven",
        "A2A-1::variable_all_to_all",
        "BRD-1::broadcast",
        "P2P-1::send_receive",
    ];
    let results = run_cases(Hostile::new(mode), |c| cases.contains(&c.name().as_str()))
        .expect("the COMMCHECK_* settings are valid");
    if results.cases.len() != cases.len() {
        return Err(format!("expected {} results, got {:?}", cases.len(), results.cases).into());
    }
    for case in &results.cases {
        let said = format!(
            "{} {}",
            case.message.clone().unwrap_or_default(),
            case.notes.join(" ")
        );
        let missing: Vec<&&str> = says.iter().filter(|s| !said.contains(**s)).collect();
        if case.verdict != verdict || !missing.is_empty() {
            return Err(format!(
                "{mode:?}: {} was {} saying {said:?}; expected {verdict} saying {says:?}",
                case.name, case.verdict
            )
            .into());
        }
    }
    Ok(())
}

/// A harness whose "reversed" group is the world's in world order: the
/// steps on it expect member order, so GAT-1 and A2A-1 fail, naming the order.
fn groups_in_another_member_order_are_checked_in_that_order() -> Result<(), Failed> {
    let cases = ["GAT-1::all_gather_even", "A2A-1::variable_all_to_all"];
    let results = run_cases(Hostile::new(Mode::OrderIgnored), |c| {
        cases.contains(&c.name().as_str())
    })
    .expect("the COMMCHECK_* settings are valid");
    for case in &results.cases {
        let message = case.message.clone().unwrap_or_default();
        if case.verdict != Verdict::Fail || !message.contains("reversed order") {
            return Err(format!(
                "{}: a group built in world order where reversed order was asked for should \
                 fail naming the order; got {} {message:?}",
                case.name, case.verdict
            )
            .into());
        }
    }
    Ok(())
}

/// An abort kills an in-process run, so it is shown under process isolation:
/// this binary re-runs itself as a hostile suite with `COMMCHECK_ISOLATION=process`.
fn abort_is_contained() -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = std::process::Command::new(exe)
        .args(["RET-1::local_dependencies", "--exact"])
        .env("HOSTILE_MODE", "Aborts")
        .env("COMMCHECK_ISOLATION", "process")
        .env(
            "COMMCHECK_RESULTS",
            std::env::temp_dir().join("commcheck-hostile-abort.json"),
        )
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() || !stdout.contains("crash:") || !stdout.contains("signal") {
        return Err(format!(
            "expected a crash verdict naming the signal, got status {} and:\n{stdout}",
            output.status
        )
        .into());
    }
    Ok(())
}

/// Without process isolation an abort kills the whole run, and libtest
/// prints nothing about the case in flight; its start mark in the results
/// directory names it, and merging the records says it never finished.
fn abort_in_process_is_named_by_the_records() -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let output = std::process::Command::new(exe)
        .args(["RET-1::local_dependencies", "RET-2::submit"])
        .env("HOSTILE_MODE", "Aborts")
        .env("COMMCHECK_ISOLATION", "thread")
        .env("COMMCHECK_RESULTS_DIR", dir.path())
        .output()
        .map_err(|e| e.to_string())?;
    if output.status.success() {
        return Err("expected the in-process run to die of the abort".into());
    }
    let collected = commcheck::runner::records::collect(dir.path()).map_err(|e| e.to_string())?;
    let why = collected.results.incomplete.clone().unwrap_or_default();
    if !collected
        .unfinished
        .contains(&"RET-1::local_dependencies".to_owned())
        || !why.contains("started and never finished")
        || !why.contains("RET-1::local_dependencies")
    {
        return Err(format!(
            "expected the records to name RET-1::local_dependencies as started and never \
             finished; got unfinished {:?}, incomplete {why:?}",
            collected.unfinished
        )
        .into());
    }
    Ok(())
}

/// Every bad `COMMCHECK_*` value stops `commcheck::main` before any case,
/// with exit status 2 and a message naming the variable and the value.
fn bad_settings_are_errors_naming_the_variable() -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    for (variable, value) in [
        ("COMMCHECK_CASE_TIMEOUT_MS", "abc"),
        ("COMMCHECK_CASE_TIMEOUT_MS", "0"),
        ("COMMCHECK_SEED", "xyz"),
        ("COMMCHECK_JOBS", "0"),
        ("COMMCHECK_ISOLATION", "proces"),
    ] {
        let output = std::process::Command::new(&exe)
            .args(["SUM-1::all_reduce_sum", "--exact"])
            .env("HOSTILE_MODE", "WorldFails")
            .env(variable, value)
            .output()
            .map_err(|e| e.to_string())?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let named = format!("{variable}={value:?} is not accepted: expected ");
        if output.status.code() != Some(2) || !stderr.contains(&named) || stdout.contains("test ") {
            return Err(format!(
                "{variable}={value}: expected exit status 2, no case run and a message containing \
                 {named:?}; got status {} and stderr:\n{stderr}\nstdout:\n{stdout}",
                output.status
            )
            .into());
        }
    }
    Ok(())
}

/// Like libtest, `commcheck::main` takes several filters: a case is listed
/// (or run) when its name matches one of them.
fn several_filters_pick_the_union() -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = std::process::Command::new(&exe)
        .args(["--list", "SUM-1", "BAR-1", "--format", "terse"])
        .env("HOSTILE_MODE", "WorldFails")
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let listed: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .collect();
    if !output.status.success() || listed != ["SUM-1::all_reduce_sum", "BAR-1::barrier"] {
        return Err(format!(
            "expected SUM-1::all_reduce_sum and BAR-1::barrier listed, got status {} and:\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(())
}

/// The watchdog counts from the last progress: a world whose ranks keep
/// moving for longer than the watchdog (as on a loaded machine) is no
/// timeout; one where nothing moves for a watchdog period is; one still
/// moving at the ceiling proves nothing and says so.
fn watchdog_counts_from_progress() -> Result<(), Failed> {
    use commcheck::world::run_script;
    use std::time::Duration;
    let limit = Duration::from_secs(1);
    let harness = Arc::new(CpuHarness::new());
    let ticking = |ticks: usize| {
        move |ctx: &commcheck::RankCtx<'_, CpuHarness>| -> commcheck::Check {
            for tick in 0..ticks {
                std::thread::sleep(Duration::from_millis(50));
                ctx.signal(&format!("tick-{}-{tick}", ctx.rank()));
            }
            Ok(())
        }
    };
    // 40 ticks of 50 ms: twice the watchdog in all, always moving.
    run_script(Arc::clone(&harness), 2, 0, limit, ticking(40))
        .map_err(|e| format!("a world moving every 50 ms under a 1 s watchdog: {e}"))?;
    // Still for 30 s: the watchdog ends it (the sleeping ranks are left behind).
    match run_script(Arc::clone(&harness), 2, 0, limit, |_ctx| {
        std::thread::sleep(Duration::from_secs(30));
        Ok(())
    }) {
        Err(e) if e.contains("timed out: nothing moved") => {}
        other => {
            return Err(format!(
                "a world still for 30 s under a 1 s watchdog: expected a timeout, got {other:?}"
            )
            .into())
        }
    }
    // Moving for 15 s: past the ceiling of six watchdogs.
    match run_script(harness, 2, 0, limit, ticking(300)) {
        Err(e) if e.contains("though not hung") => Ok(()),
        other => Err(format!(
            "a world moving past the ceiling: expected an overrun, not a timeout, got {other:?}"
        )
        .into()),
    }
}

/// A `wait()` that polls in a busy loop for work that never ends is a
/// hang like one asleep: `timeout`, naming the call, once the rank burnt a
/// watchdog of its own run time in it (so on a loaded machine too, where
/// that takes longer), never `inconclusive`.
fn spinning_wait_is_a_timeout() -> Result<(), Failed> {
    let cases = [
        "EXC-4::submit",
        "EXC-5::local_dependencies",
        "RET-6::submit",
    ];
    survives(Mode::WaitSpinsForever, &cases, &[Verdict::Timeout])?;
    // EXC-4 calls `wait()` right after the (never effective) release.
    let results = run_cases(Hostile::new(Mode::WaitSpinsForever), |case| {
        case.name() == cases[0]
    })
    .expect("the COMMCHECK_* settings are valid");
    let message = results
        .cases
        .first()
        .and_then(|case| case.message.clone())
        .unwrap_or_default();
    if !(message.contains("rank 0: spinning: ") && message.contains("inside wait()")) {
        return Err(
            format!("the spinning rank's timeout does not name its call: {message:?}").into(),
        );
    }
    Ok(())
}

fn main() {
    if let Some(mode) = std::env::var("HOSTILE_MODE")
        .ok()
        .and_then(|m| Mode::parse(&m))
    {
        commcheck::main(Hostile::new(mode));
    }
    // Hangs are bounded by the watchdog; keep it short so this file runs quickly.
    std::env::set_var("COMMCHECK_CASE_TIMEOUT_MS", "1500");
    let args = Arguments::from_args();
    let trials = vec![
        Trial::test("wait_that_never_returns_is_a_timeout", || {
            survives(
                Mode::WaitNeverReturns,
                &["EXC-5::local_dependencies", "RET-6::submit"],
                &[Verdict::Timeout, Verdict::Fail],
            )
        }),
        Trial::test(
            "wait_that_spins_forever_is_a_timeout",
            spinning_wait_is_a_timeout,
        ),
        Trial::test(
            "watchdog_counts_from_the_last_progress",
            watchdog_counts_from_progress,
        ),
        Trial::test("drop_that_blocks_forever_is_a_timeout", || {
            survives(
                Mode::DropBlocks,
                &["EXC-10::local_dependencies"],
                &[Verdict::Timeout],
            )
        }),
        Trial::test("panic_while_holding_a_lock_is_a_crash", || {
            survives(
                Mode::PanicsHoldingLock,
                &["RET-1::local_dependencies", "RET-3::all_reduce_sum"],
                &[Verdict::Crash],
            )
        }),
        Trial::test(
            "abort_under_process_isolation_is_a_crash",
            abort_is_contained,
        ),
        Trial::test(
            "abort_in_process_is_named_by_the_records",
            abort_in_process_is_named_by_the_records,
        ),
        Trial::test(
            "bad_settings_are_errors_naming_the_variable",
            bad_settings_are_errors_naming_the_variable,
        ),
        Trial::test(
            "several_filters_pick_the_union",
            several_filters_pick_the_union,
        ),
        Trial::test("harness_that_cannot_build_a_world_fails_clearly", || {
            broken_harness_fails_clearly(Mode::WorldFails, "no device available for a world")
        }),
        Trial::test("harness_that_cannot_build_a_tensor_fails_clearly", || {
            broken_harness_fails_clearly(Mode::TensorFails, "out of tensor memory")
        }),
        Trial::test("harness_whose_world_panics_is_a_crash", || {
            harness_panic_is_a_crash(Mode::WorldPanics, "Harness::world")
        }),
        Trial::test("harness_whose_rank_panics_is_a_crash", || {
            harness_panic_is_a_crash(Mode::RankPanics, "Harness::rank")
        }),
        Trial::test(
            "lazy_work_that_fails_is_not_supported",
            failing_lazy_work_is_not_supported,
        ),
        Trial::test(
            "dtype_the_harness_builds_wrongly_blames_the_harness",
            || {
                value_checks(
                    Mode::Bf16BuiltAsF16,
                    Verdict::Fail,
                    &[
                        "harness",
                        "bf16 tensor",
                        "read back, before any backend call",
                    ],
                )
            },
        ),
        Trial::test(
            "dtype_the_backend_refuses_is_not_supported_quoting_it",
            || {
                value_checks(
                    Mode::Bf16Refused,
                    Verdict::Pass,
                    &["bf16: not supported by the backend", "a bf16 tensor"],
                )
            },
        ),
        Trial::test(
            "groups_in_another_member_order_are_checked_in_that_order",
            groups_in_another_member_order_are_checked_in_that_order,
        ),
        Trial::test(
            "sizes_above_the_harness_limit_are_skipped_with_the_reason",
            || {
                value_checks(
                    Mode::SmallMessages,
                    Verdict::Pass,
                    &["skipped: above the harness's limit of 65536 bytes per rank"],
                )
            },
        ),
        Trial::test(
            "harness_that_declares_an_absent_instrument_fails_clearly",
            || {
                broken_harness_fails_clearly(
                    Mode::ProbeDeclaredButAbsent,
                    "declares the liveness probe instrument",
                )
            },
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}
