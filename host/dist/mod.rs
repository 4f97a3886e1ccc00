//! Full-graph training across GPUs and hosts (DESIGN.md §9): nodes into parts that own
//! contiguous ranges ([`partition`]), what ranks say to each other ([`comm`]: in-process threads
//! for tests, NCCL for GPUs), how rank 0 hands out NCCL's id ([`rendezvous`]), and the per-layer
//! halo exchange between a part's local and remote products ([`halo`]).

pub mod balance;
pub mod comm;
pub mod detached;
pub mod device_comm;
pub mod device_exchange;
pub mod dist_backend;
pub mod exchange;
pub mod halo;
pub mod host_rows;
pub mod inproc;
pub mod label_prop;
pub mod nccl;
pub mod part_file;
pub mod part_graph;
pub mod partition;
pub mod rendezvous;
pub mod split_host;
pub mod train;

pub use crate::nn::halo_hook::OverlapSplit;
pub use comm::Communicator;
pub use device_comm::DeviceComm;
pub use dist_backend::{DistBackend, HaloPath};
pub use halo::{ALL_GATHER_THRESHOLD, ExchangeMethod, Halo, choose_exchange};
pub use inproc::InProcess;
pub use nccl::NcclCommunicator;
pub use partition::{PartBlocks, Partition, PartitionMethod, PartitionStats};
pub use train::{DistOptions, DistTrainer, InProcessRun, StepTiming, train_in_process};
