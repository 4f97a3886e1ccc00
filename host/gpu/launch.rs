//! The one thin unsafe layer between ops and the driver: a typed kernel handle ([`Kernel`], one
//! per entry point in [`crate::gpu::abi`]) launched with a grid, a block, dynamic shared memory
//! and its argument struct.

use std::marker::PhantomData;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};

use crate::error::{Error, Result};
use crate::gpu::Gpu;

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

/// A device address a kernel reads, as its argument struct holds it (`*const T` on the device).
#[repr(transparent)]
pub struct Ptr<T>(u64, PhantomData<fn() -> T>);
/// A device address a kernel writes (`*mut T` on the device).
#[repr(transparent)]
pub struct PtrMut<T>(u64, PhantomData<fn() -> T>);

macro_rules! address {
    ($t:ident) => {
        impl<T> $t<T> {
            pub const fn new(addr: u64) -> Self {
                $t(addr, PhantomData)
            }
            /// Address 0: an optional buffer left out (the kernel checks for null).
            pub const fn null() -> Self {
                $t(0, PhantomData)
            }
            pub const fn addr(self) -> u64 {
                self.0
            }
            /// The same address read as another element type (e.g. f16 values as 32-bit words).
            pub const fn cast<U>(self) -> $t<U> {
                $t(self.0, PhantomData)
            }
        }
        impl<T> Clone for $t<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $t<T> {}
        impl<T> std::fmt::Debug for $t<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}
address!(Ptr);
address!(PtrMut);

/// A kernel of the embedded PTX and the argument struct it takes (`gpu::abi`).
pub struct Kernel<A> {
    name: &'static str,
    args: PhantomData<fn(A)>,
}

impl<A> Clone for Kernel<A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for Kernel<A> {}

impl<A: DeviceRepr> Kernel<A> {
    pub const fn new(name: &'static str) -> Self {
        Kernel { name, args: PhantomData }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How many blocks of `block_threads` threads and `smem_bytes` dynamic shared memory fit on
    /// one SM at once (the driver's occupancy calculator), for persistent grids.
    pub fn max_active_blocks_per_sm(self, gpu: &Gpu, block_threads: u32, smem_bytes: u32) -> Result<u32> {
        gpu.kernels.occupancy((self.name, block_threads, smem_bytes), || {
            let Some(func) = self.function(gpu, Shape::linear(1, block_threads, smem_bytes))? else { return Ok(1) };
            func.occupancy_max_active_blocks_per_multiprocessor(block_threads, smem_bytes as usize, None)
                .map_err(|e| Error::cuda(format!("occupancy of {}", self.name), e))
        })
    }

    /// Launch on the GPU's stream with `args` (on the side stream inside [`Gpu::fork_join`]'s
    /// `side`).
    ///
    /// # Safety
    /// Every address in `args` must point at a live device allocation large enough for what the
    /// kernel touches with these arguments and this shape, and buffers the kernel writes must not
    /// be read by the host until the stream is synchronised.
    pub unsafe fn launch(self, gpu: &Gpu, shape: Shape, args: &A) -> Result<()> {
        let name = self.name;
        let Some(func) = self.function(gpu, shape)? else { return Ok(()) };
        let cfg = LaunchConfig { grid_dim: shape.grid, block_dim: shape.block, shared_mem_bytes: shape.smem_bytes };
        let stream = crate::gpu::side_stream::launch_stream(gpu)?;
        let mut builder = stream.launch_builder(&func);
        builder.arg(args);
        unsafe { builder.launch(cfg) }.map_err(|e| Error::cuda(format!("launching {name} with {shape:?}"), e))?;
        Ok(())
    }

    /// The function, its dynamic shared memory limit raised for `shape`; None for an empty grid
    /// (nothing to do, e.g. an empty graph).
    fn function(self, gpu: &Gpu, shape: Shape) -> Result<Option<CudaFunction>> {
        let name = self.name;
        if shape.grid.0 == 0 || shape.grid.1 == 0 || shape.grid.2 == 0 {
            return Ok(None);
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
            func.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shape.smem_bytes as i32)
                .map_err(|e| Error::cuda(format!("raising {name}'s shared memory limit"), e))?;
        }
        Ok(Some(func))
    }
}
