//! The one thin unsafe layer between ops and the driver: a kernel launch from a name, a grid,
//! a block, dynamic shared memory and a list of plain arguments.

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{LaunchConfig, PushKernelArg};

use crate::error::{Error, Result};
use crate::gpu::Gpu;

/// A kernel parameter as the PTX signature declares it.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    U32(u32),
    F32(f32),
    /// A 64-bit integer (`.u64` parameter that is not an address, e.g. a hashed seed).
    U64(u64),
    /// A device address (`.u64` parameter).
    Ptr(u64),
}

/// Grid and block shape plus dynamic shared memory bytes.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub smem_bytes: u32,
}

impl Shape {
    pub fn linear(grid: u32, block: u32, smem_bytes: u32) -> Self {
        Shape { grid: (grid, 1, 1), block: (block, 1, 1), smem_bytes }
    }
}

/// Launch `name` on the GPU's stream.
///
/// # Safety
/// `args` must match the kernel's parameter list in number, order and type, every pointer must
/// address a live device allocation large enough for what the kernel touches with these
/// arguments, and buffers written by the kernel must not be read by the host until the stream
/// is synchronised.
pub unsafe fn launch(gpu: &Gpu, name: &'static str, shape: Shape, args: &[Arg]) -> Result<()> {
    if shape.grid.0 == 0 || shape.grid.1 == 0 || shape.grid.2 == 0 {
        return Ok(()); // nothing to do (e.g. an empty graph)
    }
    let func = gpu.kernels.function(name)?;
    if shape.smem_bytes > 48 * 1024 {
        if shape.smem_bytes > gpu.info().max_smem_per_block_optin {
            return Err(Error::Unsupported(format!(
                "{name} needs {} bytes of shared memory per block, the device allows {}",
                shape.smem_bytes,
                gpu.info().max_smem_per_block_optin
            )));
        }
        func.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shape.smem_bytes as i32,
        )
        .map_err(|e| Error::cuda(format!("raising {name}'s shared memory limit"), e))?;
    }
    let cfg = LaunchConfig { grid_dim: shape.grid, block_dim: shape.block, shared_mem_bytes: shape.smem_bytes };
    let mut builder = gpu.stream.launch_builder(&func);
    for a in args {
        match a {
            Arg::U32(v) => builder.arg(v),
            Arg::F32(v) => builder.arg(v),
            Arg::U64(v) => builder.arg(v),
            Arg::Ptr(v) => builder.arg(v),
        };
    }
    unsafe { builder.launch(cfg) }.map_err(|e| Error::cuda(format!("launching {name} with {shape:?}"), e))?;
    Ok(())
}
