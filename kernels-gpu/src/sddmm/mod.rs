//! SDDMM kernels: O = (A B^T) .* S at the nonzeros of S, and edge softmax.
