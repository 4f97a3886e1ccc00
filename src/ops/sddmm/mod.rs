//! SDDMM: O = (A B^T) .* S sampled at the nonzeros of S (A, B dense N x K), and edge softmax.
