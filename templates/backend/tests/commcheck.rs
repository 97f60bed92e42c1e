// tests/commcheck.rs
use commcheck::{Claims, Harness, HarnessError, HarnessResult, Identity};
use commcheck_cpu::{CpuBackend, CpuDevice, CpuExecutor, CpuGroup, CpuRoute, CpuTensor};
use eredu_runtime::CommunicationRouteId;

#[derive(Clone)] // the fuzz targets share it (fuzz/ in the template)
struct Minimal;

struct Rank(CpuDevice, CpuExecutor, CpuGroup);

impl Harness for Minimal {
    type Backend = CpuBackend;
    type World = (CpuDevice, usize);
    type Rank = Rank;
    type Route = CpuRoute;

    fn identity(&self) -> Identity {
        Identity::new("minimal", "0.1.0", "host")
    }
    fn claims(&self) -> Claims<Self> {
        Claims::none().sum_reduction().barrier()
    }
    fn world(&self, ranks: usize) -> HarnessResult<(CpuDevice, usize)> {
        Ok((CpuDevice::new(), ranks))
    }
    fn rank(&self, (device, size): &(CpuDevice, usize), rank: usize) -> HarnessResult<Rank> {
        let group = device
            .join_group("world", *size, rank)
            .map_err(HarnessError::new)?;
        Ok(Rank(device.clone(), device.executor(), group))
    }
    fn executor<'r>(&self, rank: &'r Rank) -> &'r CpuExecutor {
        &rank.1
    }
    fn context<'r>(&self, rank: &'r Rank) -> &'r CpuExecutor {
        &rank.1
    }
    fn group<'r>(&self, rank: &'r Rank) -> &'r CpuGroup {
        &rank.2
    }
    fn route(&self, rank: &Rank, id: u64, from: usize, to: usize) -> HarnessResult<CpuRoute> {
        let id = CommunicationRouteId::new(id);
        rank.0
            .route(id, from, to, rank.2.member())
            .map_err(HarnessError::new)
    }
    fn read(&self, _: &Rank, tensor: &CpuTensor) -> HarnessResult<Vec<f32>> {
        tensor
            .read_materialised()
            .ok_or_else(|| HarnessError("not materialised".into()))
    }
}

// `fn main`, and a test that fails if Cargo.toml lacks `harness = false`.
commcheck::main!(Minimal);
