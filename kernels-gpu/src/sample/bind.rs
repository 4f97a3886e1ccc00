//! The last step of a batch made on the device (GraphSAINT or neighbour sampling), after the
//! host has read its sizes: the batch padded into a rebound model's buffers, as `PaddedBatch`
//! pads it on the CPU (`host/sample/prepared.rs`).

use crate::abi::sample::BatchBindArgs;
use crate::nn::{global_thread, grid_threads};

/// The batch (n nodes, nnz entries, n_loss loss nodes) padded to a model of `rows` rows and `cap`
/// entries: empty rows after the batch's, the missing entries as zeros at (rows - 1, rows - 1)
/// at the end; the transpose likewise (the pattern itself where no transpose pattern is given:
/// a symmetric batch), its map extended by the identity; labels, train bits and loss weights,
/// 0 on the padding.
#[inline(always)]
pub unsafe fn bind(a: BatchBindArgs) {
    let BatchBindArgs { n, nnz, rows, cap, .. } = a;
    let last = rows - 1;
    let symmetric = a.t_row_ptr_in.is_null();
    let items = if cap > rows + 1 { cap } else { rows + 1 };
    let mut i = global_thread();
    while i < items {
        let iu = i as usize;
        if i <= rows {
            let p = if i <= n {
                unsafe { *a.row_ptr.add(iu) }
            } else if i < rows {
                nnz
            } else {
                cap
            };
            let pt = if i <= n && !symmetric { unsafe { *a.t_row_ptr_in.add(iu) } } else { p };
            unsafe {
                *a.s_row_ptr.add(iu) = p;
                *a.t_row_ptr.add(iu) = pt;
            }
        }
        if i < cap {
            let real = i < nnz;
            let col = if real { unsafe { *a.cols.add(iu) } } else { last };
            let row = if real { unsafe { *a.entry_rows.add(iu) } } else { last };
            let (t_col, t_row) = if real && !symmetric { unsafe { (*a.t_cols_in.add(iu), *a.t_rows_in.add(iu)) } } else { (col, row) };
            unsafe {
                *a.s_cols.add(iu) = col;
                *a.t_cols.add(iu) = t_col;
                *a.s_rows.add(iu) = row;
                *a.t_rows.add(iu) = t_row;
                *a.s_values.add(iu) = if real { *a.values.add(iu) } else { 0.0 };
                *a.t_values_out.add(iu) = if real { *a.t_values.add(iu) } else { 0.0 };
                *a.t_of_out.add(iu) = if real { *a.t_of.add(iu) } else { i };
            }
        }
        if i < rows {
            let (label, bit, weight) = if i < n {
                let v = unsafe { *a.nodes.add(iu) } as usize;
                let n_loss = a.n_loss as f64;
                let div = if a.n_loss > 0 { n_loss } else { 1.0 };
                if a.targets > 0 {
                    // Neighbour sampling: the loss on the targets (the first nodes), a plain mean,
                    // as `PaddedBatch::new` rounds 1 / n.
                    let bit = if i < a.targets { a.train_bit as u8 } else { 0 };
                    (unsafe { *a.labels.add(v) }, bit, (1.0 / div) as f32)
                } else {
                    // GraphSAINT, as `TrainBatch::from_saint` and `PaddedBatch::new` round it:
                    // the node's weight scaled to the train mean and the batch's loss nodes,
                    // then over them.
                    let bit = (unsafe { *a.mask_bits.add(v) } as u32 & a.train_bit) as u8;
                    let scaled = (unsafe { *a.node_norm.add(v) } as f64 * a.to_train * n_loss) as f32;
                    (unsafe { *a.labels.add(v) }, bit, (scaled as f64 / div) as f32)
                }
            } else {
                (0, 0, 0.0)
            };
            unsafe {
                *a.labels_out.add(iu) = label;
                *a.mask_out.add(iu) = bit;
                *a.weights_out.add(iu) = weight;
            }
        }
        i += grid_threads();
    }
}
