//! The PTX that build.rs compiled from `kernels-gpu`, loaded once per context, and its kernels
//! looked up by name (cached: `cuModuleGetFunction` is not free on a hot path).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::error::{Error, Result};

/// The device kernels as PTX text.
pub const KERNELS_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"));
/// The architecture the PTX was built for (`TCGNN_CUDA_ARCH` at build time).
pub const KERNELS_ARCH: &str = env!("TCGNN_PTX_ARCH");

pub struct KernelModule {
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<&'static str, CudaFunction>>,
    /// Resident blocks per SM by (kernel, threads per block, dynamic shared memory): the
    /// occupancy query costs tens of microseconds, paid once, not per launch.
    occupancy: Mutex<HashMap<(&'static str, u32, u32), u32>>,
}

impl KernelModule {
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        let module = ctx
            .load_module(Ptx::from_src(KERNELS_PTX))
            .map_err(|e| Error::cuda(format!("loading the kernels' PTX (built for {KERNELS_ARCH})"), e))?;
        Ok(KernelModule { module, functions: Mutex::new(HashMap::new()), occupancy: Mutex::new(HashMap::new()) })
    }

    /// The kernel `name`, with its dynamic shared memory limit raised to `smem_bytes` if above 48 KB.
    pub fn function(&self, name: &'static str) -> Result<CudaFunction> {
        let mut map = self.functions.lock().expect("kernel cache poisoned");
        if let Some(f) = map.get(name) {
            return Ok(f.clone());
        }
        let f = self.module.load_function(name).map_err(|e| Error::cuda(format!("kernel {name} not in PTX"), e))?;
        map.insert(name, f.clone());
        Ok(f)
    }

    /// The cached occupancy of (`name`, `threads`, `smem_bytes`), or `query`'s answer stored.
    pub fn occupancy(&self, key: (&'static str, u32, u32), query: impl FnOnce() -> Result<u32>) -> Result<u32> {
        if let Some(&n) = self.occupancy.lock().expect("occupancy cache poisoned").get(&key) {
            return Ok(n);
        }
        let n = query()?;
        self.occupancy.lock().expect("occupancy cache poisoned").insert(key, n);
        Ok(n)
    }
}
