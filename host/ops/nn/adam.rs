//! Adam (as `torch.optim.Adam` with L2 `weight_decay`, `amsgrad=False`): CPU and the launchers
//! of `kernels-gpu/src/nn/adam.rs` (`adam_f32`, `adam_many_f32`; its `step_increment`, which
//! advances the step counter Adam reads, is launched by the backend that owns the counter,
//! [`crate::ops::backend::cuda::step_increment`]).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::{MIN_PAR_LEN, check_same, elementwise_shape, n4};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{self as kernels, AdamArgs, AdamManyArgs};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// Multi-tensor Adam's tables on the GPU ([`adam_table`]), by the addresses they list: one per
/// model trained on a backend, never evicted (a recorded step keeps reading its own).
#[derive(Default)]
pub struct AdamTables(Mutex<HashMap<Vec<u64>, DeviceVec<u64>>>);

impl AdamTables {
    /// Runs `f` on the table of `addrs`, uploaded the first time they are seen.
    pub(crate) fn with<R>(&self, gpu: &Arc<Gpu>, addrs: Vec<u64>, f: impl FnOnce(&DeviceVec<u64>) -> Result<R>) -> Result<R> {
        let mut tables = self.0.lock().expect("adam tables poisoned");
        let table = match tables.entry(addrs) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let t = DeviceVec::upload(gpu, e.key())?;
                e.insert(t)
            }
        };
        f(table)
    }
}

/// Adam's hyperparameters; `Default` is torch's (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
/// weight_decay 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamHyper {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
}

impl Default for AdamHyper {
    fn default() -> Self {
        AdamHyper { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }
    }
}

/// 1 - beta^t in f64 (torch computes the bias corrections in double on the host).
fn bias_correction(beta: f32, t: u32) -> f64 {
    1.0 - (beta as f64).powi(t.min(i32::MAX as u32) as i32)
}

/// One Adam step t = `step` (>= 1; panics on 0) over flat buffers of one length:
/// g = grad + wd param; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
/// param -= lr m_hat / (sqrt(v_hat) + eps), m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t).
pub fn adam_cpu<T: Real>(param: &mut [T], grad: &[T], m: &mut [T], v: &mut [T], hp: &AdamHyper, step: u32) {
    assert!(step >= 1, "adam_cpu: step counts from 1 (torch increments before the update)");
    let n = param.len();
    assert!(
        grad.len() == n && m.len() == n && v.len() == n,
        "adam_cpu: param {n}, grad {}, m {}, v {} elements",
        grad.len(),
        m.len(),
        v.len()
    );
    let f = |x: f32| T::from_f64(x as f64);
    let (lr, b1, b2, eps, wd) = (f(hp.lr), f(hp.beta1), f(hp.beta2), f(hp.eps), f(hp.weight_decay));
    let (bc1, bc2) = (T::from_f64(bias_correction(hp.beta1, step)), T::from_f64(bias_correction(hp.beta2, step)));
    let one = T::one();
    param.par_iter_mut().zip(grad.par_iter()).zip(m.par_iter_mut().zip(v.par_iter_mut())).with_min_len(MIN_PAR_LEN).for_each(
        |((p, &g), (m, v))| {
            let g = g + wd * *p;
            *m = b1 * *m + (one - b1) * g;
            *v = b2 * *v + (one - b2) * g * g;
            let (m_hat, v_hat) = (*m / bc1, *v / bc2);
            *p -= lr * m_hat / (v_hat.sqrt() + eps);
        },
    );
}

/// One Adam step on the device over whole padded buffers (padding stays 0). The step t is
/// `step[0]`, read when the kernel runs (>= 1: advance it with [`crate::ops::backend::cuda::step_increment`] before the
/// update, as torch does; t = 0 divides by zero).
pub fn adam(
    param: &mut DeviceMatrix<f32>,
    grad: &DeviceMatrix<f32>,
    m: &mut DeviceMatrix<f32>,
    v: &mut DeviceMatrix<f32>,
    hp: &AdamHyper,
    step: &DeviceVec<u32>,
) -> Result<()> {
    check_same(param, grad, "adam grad")?;
    check_same(param, m, "adam m")?;
    check_same(param, v, "adam v")?;
    if step.is_empty() {
        return Err(Error::Shape("adam: empty step counter".into()));
    }
    let gpu = param.gpu().clone();
    let n4 = n4(param);
    let args = AdamArgs {
        n4,
        param: param.arg_mut(),
        grad: grad.arg(),
        m: m.arg_mut(),
        v: v.arg_mut(),
        lr: hp.lr,
        beta1: hp.beta1,
        beta2: hp.beta2,
        eps: hp.eps,
        weight_decay: hp.weight_decay,
        step: step.arg(&gpu),
    };
    // SAFETY: the four buffers hold n4 float4s, step one u32.
    unsafe { kernels::adam_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

/// [`adam_many`]'s table for `tensors` ((param, grad, m, v) each, checked as [`adam`] checks
/// them): per tensor its four addresses, then each tensor's first float4 in their
/// concatenation and the total.
pub fn adam_table(tensors: &mut [AdamTensors<'_, DeviceMatrix<f32>>]) -> Result<Vec<u64>> {
    let mut addrs = Vec::with_capacity(5 * tensors.len() + 1);
    let mut starts = vec![0u64];
    for t in tensors.iter_mut() {
        check_same(t.param, t.grad, "adam grad")?;
        check_same(t.param, t.m, "adam m")?;
        check_same(t.param, t.v, "adam v")?;
        addrs.extend([t.param.ptr_mut(), t.grad.ptr(), t.m.ptr_mut(), t.v.ptr_mut()]);
        starts.push(starts.last().copied().unwrap_or(0) + n4(t.param));
    }
    addrs.extend(starts);
    Ok(addrs)
}

/// One Adam step on the device over every tensor of `table` (an upload of [`adam_table`]:
/// `tensors` tensors of `total4` float4s in all, its last value) in one launch; the step as
/// [`adam`]'s.
pub fn adam_many(gpu: &Gpu, table: &DeviceVec<u64>, tensors: usize, total4: u64, hp: &AdamHyper, step: &DeviceVec<u32>) -> Result<()> {
    if step.is_empty() {
        return Err(Error::Shape("adam_many: empty step counter".into()));
    }
    if table.len() != 5 * tensors + 1 {
        return Err(Error::Shape(format!("adam_many: a table of {} values for {tensors} tensors (want {})", table.len(), 5 * tensors + 1)));
    }
    if tensors == 0 {
        return Ok(());
    }
    let args = AdamManyArgs {
        tensors: u32::try_from(tensors).map_err(|_| Error::Shape(format!("adam_many: {tensors} tensors")))?,
        table: table.arg(gpu),
        lr: hp.lr,
        beta1: hp.beta1,
        beta2: hp.beta2,
        eps: hp.eps,
        weight_decay: hp.weight_decay,
        step: step.arg(gpu),
    };
    // SAFETY: the table's addresses are buffers of the float4 counts its starts give (built by
    // `adam_table` from checked matrices), step one u32.
    unsafe { kernels::adam_many_f32.launch(gpu, elementwise_shape(gpu, total4), &args) }
}

// -- the op on each backend --

/// One tensor's buffers for an Adam update: its value, gradient and two moments.
pub struct AdamTensors<'a, M> {
    pub param: &'a mut M,
    pub grad: &'a M,
    pub m: &'a mut M,
    pub v: &'a mut M,
}

pub trait AdamOp: Backend {
    /// One Adam update of `param` from `grad` (moments `m`, `v`), at the current step count.
    fn adam(&self, param: &mut Self::Mat, grad: &Self::Mat, m: &mut Self::Mat, v: &mut Self::Mat, hyper: &AdamHyper) -> Result<()>;
    /// One Adam update of every tensor of `tensors` (a model's parameters), each as
    /// [`AdamOp::adam`] updates it.
    fn adam_many(&self, tensors: &mut [AdamTensors<'_, Self::Mat>], hyper: &AdamHyper) -> Result<()> {
        for t in tensors {
            self.adam(t.param, t.grad, t.m, t.v, hyper)?;
        }
        Ok(())
    }
}

impl<T: Real> AdamOp for CpuBackend<T> {
    fn adam(&self, param: &mut HostMat<T>, grad: &HostMat<T>, m: &mut HostMat<T>, v: &mut HostMat<T>, hyper: &AdamHyper) -> Result<()> {
        same_shape("adam", param, grad)?;
        adam_cpu(&mut param.data, &grad.data, &mut m.data, &mut v.data, hyper, self.step().max(1));
        Ok(())
    }
}

impl AdamOp for CudaBackend {
    fn adam(
        &self,
        param: &mut DeviceMatrix<f32>,
        grad: &DeviceMatrix<f32>,
        m: &mut DeviceMatrix<f32>,
        v: &mut DeviceMatrix<f32>,
        hyper: &AdamHyper,
    ) -> Result<()> {
        self.timed("adam", || adam(param, grad, m, v, hyper, &self.step_ptr()))
    }
    /// One launch for all tensors. Their table is uploaded the first time a set of buffers is
    /// seen and kept (keyed by the addresses): a recorded step finds it and uploads nothing.
    fn adam_many(&self, tensors: &mut [AdamTensors<'_, DeviceMatrix<f32>>], hyper: &AdamHyper) -> Result<()> {
        let addrs = adam_table(tensors)?;
        let total4 = addrs[addrs.len() - 1];
        self.op_state.get::<AdamTables>().with(&self.gpu, addrs, |table| {
            self.timed("adam", || adam_many(&self.gpu, table, tensors.len(), total4, hyper, &self.step_ptr()))
        })
    }
}
