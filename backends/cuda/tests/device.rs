//! The device layer on a real GPU: each mechanism the backend is built
//! from, checked where it can fail. Without a GPU every test is ignored
//! with the reason (never a pass); `COMMCHECK_REQUIRE_CUDA=1` makes that a
//! failure. Tests run one at a time: a held stream may share a hardware
//! queue with another test's stream.

use commcheck_cuda::{
    cuda_required, poll_until, share, CudaDevice, CudaError, DeviceMemory, Event, HoldGate,
    HostSlot, Launch, RankAddresses, Segment, MAX_RANKS,
};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

mod support;
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long a step that must not block may take before it counts as
/// blocked: generous (a loaded machine), and only ever reached on failure.
const NOT_BLOCKED: Duration = Duration::from_secs(10);

fn shared_device() -> Result<&'static CudaDevice, String> {
    static DEVICE: OnceLock<Result<CudaDevice, String>> = OnceLock::new();
    DEVICE
        .get_or_init(|| CudaDevice::open(0).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

type Check = fn(&CudaDevice) -> Result<(), Failed>;

/// Listed ignored when CUDA is not usable here and not required.
fn trial(name: &'static str, check: Check, skipped: bool) -> Trial {
    Trial::ignorable_test(format!("device::{name}"), move || {
        let required = cuda_required().map_err(|e| Failed::from(e.to_string()))?;
        match shared_device() {
            Ok(device) => check(device).map(|()| Completion::Completed),
            Err(reason) if required => {
                Err(format!("COMMCHECK_REQUIRE_CUDA=1 and CUDA is not usable: {reason}").into())
            }
            Err(reason) => support::not_supported(&reason),
        }
    })
    .with_ignored_flag(skipped)
}

fn fail(error: CudaError) -> Failed {
    error.to_string().into()
}

fn in_time(event: &Event, within: Duration) -> Result<bool, Failed> {
    poll_until(event, Some(Instant::now() + within)).map_err(fail)
}

/// Runs `step` on another thread; `Err` if it has not returned within
/// [`NOT_BLOCKED`] (then `unblock` runs, so the thread can finish).
fn must_not_block<T: Send + 'static>(
    what: &str,
    step: impl FnOnce() -> T + Send + 'static,
    unblock: impl FnOnce(),
) -> Result<T, Failed> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(step());
    });
    match receive.recv_timeout(NOT_BLOCKED) {
        Ok(value) => Ok(value),
        Err(_) => {
            unblock();
            Err(format!("{what} blocked for {NOT_BLOCKED:?} behind a held stream").into())
        }
    }
}

fn filled(device: &CudaDevice, values: &[f32]) -> Result<DeviceMemory, Failed> {
    let memory = device.alloc(std::mem::size_of_val(values)).map_err(fail)?;
    memory.write(values).map_err(fail)?;
    Ok(memory)
}

fn word(device: &CudaDevice) -> Result<HostSlot, Failed> {
    device.slot(4).map_err(fail)
}

/// A one-segment copy table of `len` floats.
fn copy_table(
    device: &CudaDevice,
    source: &DeviceMemory,
    destination: &DeviceMemory,
    len: u64,
) -> Result<HostSlot, Failed> {
    let table = device.slot(64).map_err(fail)?;
    // The table counts halves (16-bit units): two per `f32`.
    let halves = 2 * len;
    let words = [
        1u64,
        source.address(),
        destination.address(),
        1,
        halves,
        halves,
        halves,
    ];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    table.write_bytes(&bytes).map_err(fail)?;
    Ok(table)
}

/// EXC-1's mechanism: a query of held work says "not complete" without
/// blocking, and the work completes exactly once the gate opens.
fn event_query_never_blocks_while_held(device: &CudaDevice) -> Result<(), Failed> {
    let stream = device.stream().map_err(fail)?;
    let values: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let (source, destination) = (filled(device, &values)?, filled(device, &[0.0; 4096])?);
    let table = copy_table(device, &source, &destination, 4096)?;
    let error = word(device)?;
    let gate = Arc::new(HoldGate::new(device).map_err(fail)?);
    gate.close(&stream).map_err(fail)?;
    let copy = Launch::CopySegments {
        table: table.address(),
        elements: 4096,
    };
    device
        .launch(&stream, copy, 0, error.address())
        .map_err(fail)?;
    let done = Arc::new(device.record(&stream, Event::COMPLETION).map_err(fail)?);
    let query = Arc::clone(&done);
    let opener = Arc::clone(&gate);
    let complete = must_not_block("cuEventQuery", move || query.query(), move || opener.open())?;
    if complete.map_err(fail)? {
        return Err("held work reported complete before its gate opened".into());
    }
    if destination.read::<f32>(1).map_err(fail)?[0] != 0.0 {
        return Err("held work ran before its gate opened".into());
    }
    gate.open();
    done.synchronize().map_err(fail)?;
    if !done.query().map_err(fail)? || destination.read::<f32>(4096).map_err(fail)? != values {
        return Err(
            "after the gate opened, the copy did not complete with the source's values".into(),
        );
    }
    Ok(())
}

/// The hold instrument: only a host store opens the gate; 200 ms of
/// polling sees the work pending throughout.
fn hold_opens_only_on_host_store(device: &CudaDevice) -> Result<(), Failed> {
    let stream = device.stream().map_err(fail)?;
    let gate = HoldGate::new(device).map_err(fail)?;
    gate.close(&stream).map_err(fail)?;
    let done = device.record(&stream, Event::COMPLETION).map_err(fail)?;
    if in_time(&done, Duration::from_millis(200))? {
        gate.open();
        return Err("a closed gate let its stream complete without a host store".into());
    }
    gate.open();
    if !in_time(&done, NOT_BLOCKED)? {
        return Err(format!(
            "the gate's host store did not release the stream within {NOT_BLOCKED:?}"
        )
        .into());
    }
    Ok(())
}

/// A collective's gates: a stream's own write of a word opens another
/// stream's wait on it (`cuStreamWriteValue32` / `cuStreamWaitValue32`).
fn one_stream_opens_another(device: &CudaDevice) -> Result<(), Failed> {
    let (first, second) = (
        device.stream().map_err(fail)?,
        device.stream().map_err(fail)?,
    );
    let gate = HoldGate::new(device).map_err(fail)?;
    let signal = word(device)?;
    gate.close(&first).map_err(fail)?;
    signal.write_on(&first, 1).map_err(fail)?;
    signal.wait_on(&second, 1).map_err(fail)?;
    let done = device.record(&second, Event::COMPLETION).map_err(fail)?;
    if in_time(&done, Duration::from_millis(100))? {
        gate.open();
        return Err("a stream passed a wait whose word nobody had written".into());
    }
    gate.open();
    if !in_time(&done, NOT_BLOCKED)? || signal.load() != 1 {
        return Err("the first stream's write did not open the second stream's wait".into());
    }
    Ok(())
}

/// SUM-1's mechanism: the fused all-reduce over stream-ranks, each rank
/// summing its share of every input in member order into every output,
/// with the addresses read from mapped host memory.
fn all_reduce_sum_on_stream_ranks(device: &CudaDevice) -> Result<(), Failed> {
    for ranks in [2usize, 3, 4, 8] {
        let len = 10_007usize; // not a multiple of the ranks or the block
        let inputs = (0..ranks)
            .map(|r| {
                filled(
                    device,
                    &(0..len)
                        .map(|i| (r * 1000 + i % 97) as f32)
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = (0..ranks)
            .map(|_| filled(device, &vec![0.0f32; len]))
            .collect::<Result<Vec<_>, _>>()?;
        let mut addresses = RankAddresses {
            inputs: [0; MAX_RANKS],
            outputs: [0; MAX_RANKS],
        };
        for r in 0..ranks {
            addresses.inputs[r] = inputs[r].address();
            addresses.outputs[r] = outputs[r].address();
        }
        let descriptor = device
            .slot(std::mem::size_of::<RankAddresses>())
            .map_err(fail)?;
        descriptor.write_value(&addresses).map_err(fail)?;
        let streams = (0..ranks)
            .map(|_| device.stream())
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let error = word(device)?;
        let mut ends = Vec::new();
        for (r, stream) in streams.iter().enumerate() {
            let (begin, end) = share(len, ranks, r);
            let launch = Launch::AllReduceSum {
                ranks: descriptor.address(),
                count: ranks as u32,
                begin,
                end,
                element: 0,
            };
            device
                .launch(stream, launch, 0, error.address())
                .map_err(fail)?;
            ends.push(device.record(stream, Event::COMPLETION).map_err(fail)?);
        }
        for end in &ends {
            end.synchronize().map_err(fail)?;
        }
        let expected: Vec<f32> = (0..len)
            .map(|i| (0..ranks).map(|r| (r * 1000 + i % 97) as f32).sum())
            .collect();
        for (r, output) in outputs.iter().enumerate() {
            if output.read::<f32>(len).map_err(fail)? != expected {
                return Err(format!(
                    "{ranks} stream-ranks: rank {r}'s output is not the member-order sum"
                )
                .into());
            }
        }
        if error.load() != 0 {
            return Err(
                format!("{ranks} stream-ranks: the error word says {}", error.load()).into(),
            );
        }
    }
    Ok(())
}

/// 16-bit elements through the backend: the sum widens to `f32`, adds in
/// member order and rounds once (bit for bit what `half` makes of the
/// `f32` sum), past the first share; an odd-length gather and a broadcast
/// move them bit for bit (the copies' 16-bit path).
fn sixteen_bit_elements(device: &CudaDevice) -> Result<(), Failed> {
    use commcheck_cuda::{CudaBackend, CudaExecutor, CudaGroup, CudaTensor, Element};
    use eredu_core::Completion as _;
    use eredu_runtime::backend::{BroadcastBackend, EvenGatherBackend, SumReductionBackend};
    type Narrow = fn(f32) -> [u8; 2];
    type Widen = fn([u8; 2]) -> f32;
    let kinds: [(Element, Narrow, Widen); 2] = [
        (
            Element::F16,
            |v| half::f16::from_f32(v).to_le_bytes(),
            |b| half::f16::from_le_bytes(b).to_f32(),
        ),
        (
            Element::Bf16,
            |v| half::bf16::from_f32(v).to_le_bytes(),
            |b| half::bf16::from_le_bytes(b).to_f32(),
        ),
    ];
    for (element, narrow, widen) in kinds {
        let ranks = 3;
        let len = 1_001usize; // past the first 256-element share, odd
        let inputs: Vec<Vec<u8>> = (0..ranks)
            .map(|r| {
                (0..len)
                    .flat_map(|i| narrow(((i * 7 + r * 13) % 211) as f32 * 0.37 - 30.0))
                    .collect()
            })
            .collect();
        let groups = CudaGroup::create(device, ranks).map_err(fail)?;
        let executors = (0..ranks)
            .map(|_| CudaExecutor::new(device))
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let tensor = |bytes: &[u8], shape: &[i32]| {
            CudaTensor::from_bytes(device, element, bytes, shape).map_err(fail)
        };
        let mut sums = Vec::new();
        let mut gathers = Vec::new();
        let mut broadcasts = Vec::new();
        for r in 0..ranks {
            let (group, executor) = (&groups[r], &executors[r]);
            let value = tensor(&inputs[r], &[len as i32])?;
            sums.push(CudaBackend::all_reduce_sum(value.clone(), group, executor).map_err(fail)?);
            let odd = tensor(&inputs[r][..14], &[7])?;
            gathers.push(CudaBackend::all_gather_even(odd, 0, group, executor).map_err(fail)?);
            broadcasts.push(CudaBackend::broadcast(value, 1, group, executor).map_err(fail)?);
        }
        let pair = |bytes: &[u8], i: usize| [bytes[2 * i], bytes[2 * i + 1]];
        let expected: Vec<u8> = (0..len)
            .flat_map(|i| narrow((0..ranks).map(|r| widen(pair(&inputs[r], i))).sum()))
            .collect();
        let gathered: Vec<u8> = inputs
            .iter()
            .flat_map(|input| input[..14].to_vec())
            .collect();
        for r in 0..ranks {
            for (what, submission, want) in [
                ("sum", &sums[r], &expected),
                ("gather", &gathers[r], &gathered),
                ("broadcast", &broadcasts[r], &inputs[1]),
            ] {
                submission.completion.wait().map_err(fail)?;
                let got = submission.output.read_bytes().map_err(fail)?;
                if submission.output.element() != element || &got != want {
                    return Err(format!(
                        "{element} {what}: rank {r}'s output ({} tensor) differs from the expected bytes",
                        submission.output.element()
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// NativeCancel's mechanism: a running kernel polls the cancel word and
/// stops once the host sets it; its error word says "cancelled".
fn cancel_word_stops_a_running_kernel(device: &CudaDevice) -> Result<(), Failed> {
    let stream = device.stream().map_err(fail)?;
    let (cancel, error) = (word(device)?, word(device)?);
    // About a minute at 2 GHz: only the cancel word ends it in time.
    let spin = Launch::Spin {
        cycles: 120_000_000_000,
    };
    device
        .launch(&stream, spin, cancel.address(), error.address())
        .map_err(fail)?;
    let done = device.record(&stream, Event::COMPLETION).map_err(fail)?;
    if in_time(&done, Duration::from_millis(100))? {
        return Err("the spinning kernel finished on its own within 100 ms".into());
    }
    cancel.store(1);
    if !in_time(&done, NOT_BLOCKED)? {
        return Err(
            format!("the kernel did not stop within {NOT_BLOCKED:?} of the cancel store").into(),
        );
    }
    match error.load() {
        1 => Ok(()),
        other => Err(format!(
            "a cancelled kernel's error word says {other}, expected 1 (cancelled)"
        )
        .into()),
    }
}

/// A copy cancelled before it starts touches nothing (block-uniform check).
fn cancelled_copy_touches_nothing(device: &CudaDevice) -> Result<(), Failed> {
    let stream = device.stream().map_err(fail)?;
    let (source, destination) = (
        filled(device, &[3.0f32; 1 << 16])?,
        filled(device, &[0.0f32; 1 << 16])?,
    );
    let table = copy_table(device, &source, &destination, 1 << 16)?;
    let (cancel, error) = (word(device)?, word(device)?);
    cancel.store(1);
    let copy = Launch::CopySegments {
        table: table.address(),
        elements: 1 << 16,
    };
    device
        .launch(&stream, copy, cancel.address(), error.address())
        .map_err(fail)?;
    device
        .record(&stream, Event::COMPLETION)
        .map_err(fail)?
        .synchronize()
        .map_err(fail)?;
    if destination
        .read::<f32>(1 << 16)
        .map_err(fail)?
        .iter()
        .any(|&v| v != 0.0)
        || error.load() != 1
    {
        return Err("a copy cancelled before it started wrote its destination".into());
    }
    Ok(())
}

/// P2P-2's mechanism: the receiver compares the header bytes that arrived
/// with the expected ones before copying the payload.
fn receive_checks_the_header(device: &CudaDevice) -> Result<(), Failed> {
    let stream = device.stream().map_err(fail)?;
    // Message: 4 header bytes, then 4 floats.
    let mut message: Vec<u8> = vec![1, 2, 3, 4];
    for v in [5.0f32, 6.0, 7.0, 8.0] {
        message.extend(v.to_le_bytes());
    }
    let sent = device.alloc(message.len()).map_err(fail)?;
    sent.write(&message).map_err(fail)?;
    let plan = word(device)?;
    plan.write_bytes(&sent.address().to_le_bytes())
        .map_err(fail)?;
    for (expected, code) in [([1u8, 2, 3, 4], 0u32), ([1, 2, 3, 5], 2)] {
        let header = word(device)?;
        header.write_bytes(&expected).map_err(fail)?;
        let out = filled(device, &[0.0f32; 4])?;
        let error = word(device)?;
        let receive = Launch::Receive {
            plan: plan.address(),
            offset: 0,
            header_len: 4,
            expected: header.address(),
            payload: out.address(),
            len: 8, // halves: four f32s
        };
        device
            .launch(&stream, receive, 0, error.address())
            .map_err(fail)?;
        device
            .record(&stream, Event::COMPLETION)
            .map_err(fail)?
            .synchronize()
            .map_err(fail)?;
        let payload = out.read::<f32>(4).map_err(fail)?;
        let delivered = payload == [5.0, 6.0, 7.0, 8.0];
        if error.load() != code || delivered != (code == 0) {
            return Err(format!(
                "header {expected:?}: error word {}, payload {payload:?} (expected code {code})",
                error.load()
            )
            .into());
        }
    }
    Ok(())
}

/// The fault instrument: a fault is reported in the error word and the
/// context stays usable (not sticky there; the completion keeps it sticky).
fn fault_is_reported_and_the_context_survives(device: &CudaDevice) -> Result<(), Failed> {
    let stream = device.stream().map_err(fail)?;
    let error = word(device)?;
    device
        .launch(&stream, Launch::Fault { code: 3 }, 0, error.address())
        .map_err(fail)?;
    let (source, destination) = (filled(device, &[7.0f32; 8])?, filled(device, &[0.0f32; 8])?);
    let table = copy_table(device, &source, &destination, 8)?;
    let clean = word(device)?;
    let copy = Launch::CopySegments {
        table: table.address(),
        elements: 8,
    };
    device
        .launch(&stream, copy, 0, clean.address())
        .map_err(fail)?;
    device
        .record(&stream, Event::COMPLETION)
        .map_err(fail)?
        .synchronize()
        .map_err(fail)?;
    if error.load() != 3
        || clean.load() != 0
        || destination.read::<f32>(8).map_err(fail)? != [7.0; 8]
    {
        return Err("the fault was not reported, or work after it failed".into());
    }
    Ok(())
}

/// Retention's hazard: freeing memory (the reaper's job) never waits for a
/// held stream, nor does reading a completed output, creating a stream or
/// taking pooled host memory.
fn nothing_waits_for_a_held_stream(device: &CudaDevice) -> Result<(), Failed> {
    let stream = device.stream().map_err(fail)?;
    let gate = Arc::new(HoldGate::new(device).map_err(fail)?);
    gate.close(&stream).map_err(fail)?;
    let done = device.record(&stream, Event::COMPLETION).map_err(fail)?;
    let unrelated = filled(device, &[5.0f32; 16])?;
    let opener = || {
        let gate = Arc::clone(&gate);
        move || gate.open()
    };
    must_not_block("dropping device memory", move || drop(unrelated), opener())?;
    let readable = filled(device, &[6.0f32; 16])?;
    must_not_block(
        "reading device memory",
        move || readable.read::<f32>(16).map(|_| ()),
        opener(),
    )?
    .map_err(fail)?;
    must_not_block(
        "creating a stream",
        move || shared_device().map(|d| d.stream().map(|_| ())),
        opener(),
    )?
    .map_err(Failed::from)?
    .map_err(fail)?;
    must_not_block(
        "taking 64 slots of mapped host memory",
        move || {
            shared_device().map(|d| {
                (0..64)
                    .map(|_| d.slot(4096).map(drop))
                    .collect::<Result<Vec<()>, _>>()
            })
        },
        opener(),
    )?
    .map_err(Failed::from)?
    .map_err(fail)?;
    if done.query().map_err(fail)? {
        return Err("the held stream completed while held".into());
    }
    gate.open();
    done.synchronize().map_err(fail)
}

/// Gate isolation across streams: with every pooled stream but one held,
/// work on the last completes (streams share hardware queues: the device
/// script sets `CUDA_DEVICE_MAX_CONNECTIONS=32`, the pool has 31).
fn held_streams_do_not_hold_others(device: &CudaDevice) -> Result<(), Failed> {
    let held = device.streams() - 1;
    let gates = (0..held)
        .map(|_| -> Result<_, CudaError> {
            let stream = device.stream()?;
            let gate = HoldGate::new(device)?;
            gate.close(&stream)?;
            let done = device.record(&stream, Event::COMPLETION)?;
            Ok((stream, gate, done))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    let free = device.stream().map_err(fail)?;
    let done = device.record(&free, Event::COMPLETION).map_err(fail)?;
    let completed = in_time(&done, NOT_BLOCKED);
    for (_, gate, _) in &gates {
        gate.open();
    }
    for (_, _, done) in &gates {
        done.synchronize().map_err(fail)?;
    }
    if !completed? {
        return Err(format!(
            "with {held} streams held, work on another stream did not complete within {NOT_BLOCKED:?} \
             (CUDA_DEVICE_MAX_CONNECTIONS={:?})",
            std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok()
        )
        .into());
    }
    Ok(())
}

/// Bad input: an allocation beyond device memory is an error, not a panic.
fn allocation_beyond_memory_is_an_error(device: &CudaDevice) -> Result<(), Failed> {
    match device.alloc(device.info().total_memory.saturating_mul(2)) {
        Err(CudaError::OutOfMemory { .. }) => Ok(()),
        Err(other) => Err(format!("expected OutOfMemory, got: {other}").into()),
        Ok(_) => Err("an allocation of twice the device's memory succeeded".into()),
    }
}

fn reports_the_device(device: &CudaDevice) -> Result<(), Failed> {
    let info = device.info();
    eprintln!(
        "device 0: {} (compute {}.{}, {} SMs, {} MiB), driver CUDA {}, {} pooled streams",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.multiprocessors,
        info.total_memory >> 20,
        info.driver,
        device.streams()
    );
    let _ = Segment::default();
    Ok(())
}

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let checks: [(&str, Check); 13] = [
        ("reports_the_device", reports_the_device),
        (
            "event_query_never_blocks_while_held",
            event_query_never_blocks_while_held,
        ),
        (
            "hold_opens_only_on_host_store",
            hold_opens_only_on_host_store,
        ),
        ("one_stream_opens_another", one_stream_opens_another),
        (
            "all_reduce_sum_on_stream_ranks",
            all_reduce_sum_on_stream_ranks,
        ),
        ("sixteen_bit_elements", sixteen_bit_elements),
        (
            "cancel_word_stops_a_running_kernel",
            cancel_word_stops_a_running_kernel,
        ),
        (
            "cancelled_copy_touches_nothing",
            cancelled_copy_touches_nothing,
        ),
        ("receive_checks_the_header", receive_checks_the_header),
        (
            "fault_is_reported_and_the_context_survives",
            fault_is_reported_and_the_context_survives,
        ),
        (
            "nothing_waits_for_a_held_stream",
            nothing_waits_for_a_held_stream,
        ),
        (
            "held_streams_do_not_hold_others",
            held_streams_do_not_hold_others,
        ),
        (
            "allocation_beyond_memory_is_an_error",
            allocation_beyond_memory_is_an_error,
        ),
    ];
    let skipped = shared_device().is_err() && !cuda_required().unwrap_or(true);
    let trials = checks
        .into_iter()
        .map(|(name, check)| trial(name, check, skipped))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
