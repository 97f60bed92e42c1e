// tests/commcheck.rs
use commcheck::{Claims, Harness, HarnessError, Identity};
use commcheck_cpu::{CpuBackend, CpuDevice, CpuExecutor, CpuGroup, CpuRoute, CpuTensor};
use eredu_runtime::CommunicationRouteId;

#[derive(Clone)] // the fuzz targets share it (fuzz/ in the template)
struct Minimal;

struct Rank {
    device: CpuDevice,
    executor: CpuExecutor,
    group: CpuGroup,
}

impl Harness for Minimal {
    type Backend = CpuBackend;
    type World = (CpuDevice, usize);
    type Rank = Rank;
    type Route = CpuRoute;

    fn identity(&self) -> Identity {
        Identity {
            name: "minimal".into(),
            version: "0.1.0".into(),
            device: "host".into(),
        }
    }
    fn claims(&self) -> Claims<Self> {
        Claims::none().sum_reduction().barrier()
    }
    fn world(&self, ranks: usize) -> Result<(CpuDevice, usize), HarnessError> {
        Ok((CpuDevice::new(), ranks))
    }
    fn rank(&self, (device, size): &(CpuDevice, usize), rank: usize) -> Result<Rank, HarnessError> {
        let group = device
            .join_group("world", *size, rank)
            .map_err(HarnessError::new)?;
        Ok(Rank {
            device: device.clone(),
            executor: device.executor(),
            group,
        })
    }
    fn executor<'r>(&self, rank: &'r Rank) -> &'r CpuExecutor {
        &rank.executor
    }
    fn context<'r>(&self, rank: &'r Rank) -> &'r CpuExecutor {
        &rank.executor
    }
    fn group<'r>(&self, rank: &'r Rank) -> &'r CpuGroup {
        &rank.group
    }
    fn route(
        &self,
        rank: &Rank,
        id: u64,
        from: usize,
        to: usize,
    ) -> Result<CpuRoute, HarnessError> {
        let me = rank.group.member();
        rank.device
            .route(CommunicationRouteId::new(id), from, to, me)
            .map_err(HarnessError::new)
    }
    fn tensor(
        &self,
        rank: &Rank,
        values: &[f32],
        shape: &[usize],
    ) -> Result<CpuTensor, HarnessError> {
        let shape: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
        rank.device
            .tensor(values, &shape)
            .map_err(HarnessError::new)
    }
    fn read(&self, _: &Rank, tensor: &CpuTensor) -> Result<Vec<f32>, HarnessError> {
        tensor
            .read_materialised()
            .ok_or_else(|| HarnessError("not materialised".into()))
    }
}

// `fn main`, and a test that fails if Cargo.toml lacks `harness = false`.
commcheck::main!(Minimal);
