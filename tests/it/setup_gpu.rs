//! The model-build path on the GPU (issue 15 item 5): a handle that translates on the GPU gives
//! a model its ME-BCRS values, value counts and TC8 window pointers straight from the device
//! translation (never downloading it), for Â and for Âᵀ (transposed on the host on all cores);
//! all of it must equal, bit for bit, what a CPU-translating handle gives. Skips without a GPU.

use crate::common;

use std::sync::Arc;

use common::{gpu_or_skip, odd_shapes, random_graph};
use tcgnn::graph::Csr;
use tcgnn::graph::ops::{gcn_normalize, gcn_normalize_serial};
use tcgnn::ops::handle::Translate;
use tcgnn::ops::{GraphHandle, ValueOrder};

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Symmetric graphs (GCN's usual input) and directed ones with empty rows and a hub row.
fn graphs() -> Vec<(String, Csr)> {
    let mut g = odd_shapes(5);
    g.push(("random 20000, every 3rd row empty".into(), random_graph(20_000, 9, 3, 8)));
    // Over 1M nonzeros: the handle transposes on column blocks in parallel.
    g.push(("random 150000".into(), random_graph(150_000, 8, 0, 10)));
    let sym = tcgnn::graph::ops::symmetrize(&random_graph(3000, 6, 0, 9)).unwrap();
    g.push(("symmetric 3000".into(), sym));
    // GCN takes non-negative weights only.
    g.into_iter()
        .map(|(n, a)| {
            let w = a.values().iter().map(|v| v.abs()).collect();
            (n, a.with_values(w).unwrap())
        })
        .collect()
}

#[test]
fn gpu_handles_give_the_cpu_translation_without_downloading_it() {
    let Some(gpu) = gpu_or_skip("gpu_handles_give_the_cpu_translation_without_downloading_it") else { return };
    for (name, a) in graphs() {
        let s = gcn_normalize(&a).unwrap();
        assert_eq!(s, gcn_normalize_serial(&a).unwrap(), "{name}: Â");
        let on_gpu = Arc::new(GraphHandle::new(s.clone(), Some(gpu.clone())));
        let on_cpu = Arc::new(GraphHandle::new(s.clone(), Some(gpu.clone())).with_translation(Translate::Cpu));
        let sides = [("Â", on_gpu.clone(), on_cpu.clone()), ("Âᵀ", on_gpu.transpose().unwrap(), on_cpu.transpose().unwrap())];
        for (side, g, c) in sides {
            let want = c.mebcrs(8).unwrap();
            // Asked first, before anything could have downloaded the translation.
            assert_eq!(g.value_len(ValueOrder::MeBcrs).unwrap(), want.values.len(), "{name} {side}: value count");
            assert_eq!(*g.mebcrs_win_ptr().unwrap(), want.win_ptr, "{name} {side}: window pointers");
            assert_eq!(*c.mebcrs_win_ptr().unwrap(), want.win_ptr, "{name} {side}: window pointers (CPU)");
            let v = g.device_mebcrs_values().unwrap().download(&gpu).unwrap();
            assert_eq!(bits(&v), bits(&want.values), "{name} {side}: ME-BCRS values");
            let v = c.device_mebcrs_values().unwrap().download(&gpu).unwrap();
            assert_eq!(bits(&v), bits(&want.values), "{name} {side}: ME-BCRS values (CPU translation)");
        }
        // The transposed handles' CSR and value map: the serial counting sort's.
        let (t, map) = tcgnn::graph::transpose::transpose_with_map_serial(&s);
        assert_eq!(*on_gpu.transpose().unwrap().csr(), t, "{name}: Âᵀ");
        assert_eq!(*on_gpu.transpose_map_host(ValueOrder::Csr).unwrap(), map, "{name}: transpose map");
    }
}
