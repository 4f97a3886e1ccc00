//! Inference with a saved model: rebuild it from the file's config, load its weights, run one
//! evaluation forward over the graph, and read the class of every node (and its probabilities
//! or a hidden layer's embeddings). With labels, the accuracy per mask is counted by the same
//! op the trainer counts with, so it equals what `train` reported for the saved epoch.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::nn::input::InputFeatures;
use crate::nn::models::{self, Model};
use crate::ops::backend::{TEST_BIT, TRAIN_BIT, VAL_BIT};
use crate::ops::nn::Ops;
use crate::task::node::data::Dataset;
use crate::task::saved::{SavedModel, check_names};
use crate::tensor::Matrix;

/// What a prediction gives back.
pub struct Prediction {
    /// Class of every node (argmax of the logits).
    pub classes: Vec<u32>,
    /// Softmax probabilities, `n x classes`.
    pub probabilities: Matrix,
    /// The embeddings asked for (`n x width`).
    pub embeddings: Option<Matrix>,
    /// Accuracy on the train, validation and test masks (None where a mask is empty or the
    /// data has no labels).
    pub accuracy: [Option<f64>; 3],
}

/// Runs `saved` (read from `path`, for messages) over `data` on backend `b`.
pub fn predict<B: Ops + 'static>(
    b: &Arc<B>,
    path: &Path,
    saved: &SavedModel,
    data: &Dataset,
    embedding_layer: Option<usize>,
) -> Result<Prediction> {
    saved.check_data(path, data.features.cols(), data.classes)?;
    let classes = saved.meta.classes;
    let mut net: Box<dyn Model<B>> = models::build(&**b, &data.graph, data.features.cols(), classes, &saved.meta.model)?;
    let mut want: Vec<(String, (usize, usize))> = net.params().into_iter().map(|(n, p)| (n, B::shape(&p.value))).collect();
    want.extend(net.buffers().into_iter().map(|(n, m)| (n, B::shape(m))));
    check_names(path, &want, &saved.weights)?;
    let saved_tensor = |name: &str| saved.weights.iter().find(|(n, _)| n == name).map(|(_, m)| m).expect("checked above");
    for (name, p) in net.params() {
        p.value = b.upload(saved_tensor(&name))?;
    }
    for (name, m) in net.buffers() {
        *m = b.upload(saved_tensor(&name))?;
    }
    let mut input = InputFeatures::new(&**b, &data.features)?;
    let logits = net.forward(&**b, &mut input, false)?;
    // Accuracy through the trainer's own op: the same argmax and tie-breaking.
    let n = data.n();
    let count = |bit: u8| data.mask_bits.iter().filter(|&&m| m & bit != 0).count();
    let sizes = [count(TRAIN_BIT), count(VAL_BIT), count(TEST_BIT)];
    let labels = b.labels(&data.labels, &data.mask_bits)?;
    let mut dlogits = b.matrix(n, classes)?;
    let mut stats = b.stats()?;
    b.cross_entropy(logits, &labels, 1.0 / sizes[0].max(1) as f32, &mut dlogits, &mut stats)?;
    let correct = b.read_stats(&stats)?.correct;
    let accuracy = std::array::from_fn(|i| (sizes[i] > 0 && !data.synthetic).then(|| correct[i] / sizes[i] as f64));
    let logits = b.download(logits)?;
    let embeddings = match embedding_layer {
        None => None,
        Some(l) => Some(b.download(net.embedding(l).ok_or_else(|| {
            Error::Unsupported(format!("{} has no hidden layer {l} (layers are numbered from 0)", saved.meta.model.model))
        })?)?),
    };
    let (classes_of, probabilities) = softmax_rows(&logits);
    Ok(Prediction { classes: classes_of, probabilities, embeddings, accuracy })
}

/// Argmax (first maximum) and softmax of every row.
fn softmax_rows(logits: &Matrix) -> (Vec<u32>, Matrix) {
    let mut probs = logits.clone();
    let mut classes = Vec::with_capacity(logits.rows);
    for row in probs.data.chunks_mut(logits.cols.max(1)) {
        let (arg, max) = row.iter().enumerate().fold((0, f32::NEG_INFINITY), |(ai, am), (i, &v)| if v > am { (i, v) } else { (ai, am) });
        classes.push(arg as u32);
        let sum: f64 = row.iter().map(|&v| ((v - max) as f64).exp()).sum();
        row.iter_mut().for_each(|v| *v = (((*v - max) as f64).exp() / sum) as f32);
    }
    (classes, probs)
}
